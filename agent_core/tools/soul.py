"""``soul_update``: the one way a predefined agent changes its shared SOUL.md (prompt section 7).

The file tools can't reach agent-level files (they are shared by every user), so self-evolution
gets a narrow tool instead: replace one passage of the style and tone text with another, within
the agent's guardrails. A change may not touch a heading (the file's structure and the identity
it names), must find its passage exactly once, and may rewrite at most ``soul_max_delta`` of the
file (at least ``MIN_CHANGE_CHARS``). Every previous version is kept under ``soul_history/`` so
an operator can see and undo what changed, and by whom.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from agent_core.bootstrap import SOUL_MD
from agent_core.errors import ToolError
from agent_core.settings import AgentSettings
from agent_core.tools.base import Tool, ToolContext
from agent_core.workspace import agent_workspace, sanitize_user_id

log = structlog.get_logger(__name__)

SOUL_UPDATE = "soul_update"
HISTORY_DIR = "soul_history"
MIN_CHANGE_CHARS = 240  # a short SOUL.md still allows a one-line adjustment
_locks: dict[Path, asyncio.Lock] = {}


def _lines_with_headings(text: str) -> bool:
    return any(line.lstrip().startswith("#") for line in text.splitlines())


def _write(path: Path, previous: str, updated: str, user_id: str) -> Path:
    history = path.parent / HISTORY_DIR
    history.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    kept = history / f"{stamp}-{sanitize_user_id(user_id)}.md"
    kept.write_text(previous, encoding="utf-8")
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(updated, encoding="utf-8")
    os.replace(temporary, path)  # readers see the old file or the new one, never half of it
    return kept


def soul_update_tool(settings: AgentSettings) -> Tool:
    path = agent_workspace(settings.workspace, settings.id) / SOUL_MD

    async def handler(args: dict[str, Any], ctx: ToolContext) -> str:
        find, replace, feedback = args.get("find"), args.get("replace"), args.get("feedback")
        if not isinstance(find, str) or not find.strip() or not isinstance(replace, str):
            raise ToolError(SOUL_UPDATE, "arguments 'find' and 'replace' (strings) are required")
        if not isinstance(feedback, str) or not feedback.strip():
            raise ToolError(SOUL_UPDATE, "argument 'feedback' (the user's words) is required")
        if _lines_with_headings(find) or _lines_with_headings(replace):
            raise ToolError(SOUL_UPDATE, "headings (identity, structure) may not be changed")
        async with _locks.setdefault(path, asyncio.Lock()):
            if not path.is_file():
                raise ToolError(SOUL_UPDATE, "this agent has no SOUL.md yet")
            text = await asyncio.to_thread(path.read_text, encoding="utf-8")
            if text.count(find) != 1:
                where = "does not occur" if find not in text else "occurs more than once"
                raise ToolError(SOUL_UPDATE, f"the passage to replace {where} in SOUL.md")
            limit = max(MIN_CHANGE_CHARS, int(settings.soul_max_delta * len(text)))
            if max(len(find), len(replace)) > limit:
                raise ToolError(
                    SOUL_UPDATE,
                    f"the change is larger than allowed ({limit} characters): adjust one or "
                    "two lines at a time",
                )
            updated = text.replace(find, replace, 1)
            kept = await asyncio.to_thread(_write, path, text, updated, ctx.user_id)
        log.info(
            "self_evolution.soul_updated",
            agent_id=settings.id,
            user_id=ctx.user_id,
            run_id=ctx.run_id,
            removed_chars=len(find),
            added_chars=len(replace),
            previous=kept.name,
        )
        return "SOUL.md updated; it applies from the next message. Tell the user what changed."

    return Tool(
        name=SOUL_UPDATE,
        description=(
            "Adjust the style or tone part of your SOUL.md after explicit user feedback about "
            "how you communicate: replace one short passage (no headings) with a new one."
        ),
        parameters={
            "type": "object",
            "properties": {
                "find": {"type": "string", "description": "The exact passage to replace."},
                "replace": {"type": "string", "description": "The new passage."},
                "feedback": {"type": "string", "description": "The user's feedback, quoted."},
            },
            "required": ["find", "replace", "feedback"],
        },
        handler=handler,
    )
