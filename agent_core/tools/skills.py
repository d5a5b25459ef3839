"""``skill_search``: finds the run's skills by keywords when there are too many to list in the
prompt (agent-loop spec section 2, "Skills (search mode)").

It is a deferred tool (``ToolRegistry.defer``): the loop offers it only to runs with more than
``SKILLS_INLINE_MAX`` skills (``agent_core/prompt.py``), and it ranks ``ToolContext.skills``,
the skills the run discovered, with the shared BM25 ranking.
"""

from __future__ import annotations

import json
from typing import Any

from agent_core.errors import ToolError
from agent_core.skills import skill_location
from agent_core.tools.base import Tool, ToolContext
from agent_core.tools.ranking import Entry, rank

SKILL_SEARCH_NAME = "skill_search"
DEFAULT_LIMIT = 5
MAX_LIMIT = 20


def _limit(args: dict[str, Any]) -> int:
    value = args.get("limit", DEFAULT_LIMIT)
    if value is None:
        return DEFAULT_LIMIT
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ToolError(SKILL_SEARCH_NAME, "argument 'limit' must be an integer")
    return max(1, min(MAX_LIMIT, int(value)))


async def _skill_search(args: dict[str, Any], ctx: ToolContext) -> str:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolError(SKILL_SEARCH_NAME, "argument 'query' (non-empty string) is required")
    limit = _limit(args)
    if not ctx.skills:
        return "No skills are available in this run."
    entries = [Entry(s, s.name, s.description) for s in ctx.skills]
    hits = rank(query, entries, limit=limit)
    if not hits:
        return (
            f"No skill matches {query!r} among {len(ctx.skills)} skills. Try other keywords "
            "(what the task is about, the file type, the tool or service involved)."
        )
    found = [
        {
            "name": hit.item.name,
            "description": hit.item.description,
            "path": skill_location(hit.item, ctx.workspace),
        }
        for hit in hits
    ]
    return json.dumps({"skills": found}, ensure_ascii=False)


SKILL_SEARCH = Tool(
    name=SKILL_SEARCH_NAME,
    description=(
        "Find skills (instructions for specific tasks) by keywords. Returns their names, "
        "descriptions and the path of each skill's file: read that file with read_file before "
        "using the skill."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "A few keywords describing the task, e.g. 'fill pdf form'.",
            },
            "limit": {
                "type": "integer",
                "description": f"How many skills to return (default {DEFAULT_LIMIT}, at most "
                f"{MAX_LIMIT}).",
                "minimum": 1,
                "maximum": MAX_LIMIT,
            },
        },
        "required": ["query"],
    },
    handler=_skill_search,
    read_only=True,
)

# Deferred tools every agent should have: register each with ``ToolRegistry.defer`` (the loop
# offers skill_search only to runs with many skills).
SKILL_TOOLS: tuple[Tool, ...] = (SKILL_SEARCH,)
