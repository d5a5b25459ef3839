"""A run's start: its workspace, its prompt and the messages of its first model call.

Step 1 and 2 of ``Loop.run`` (``agent_core/loop.py``): the workspace the run works in, the
context files and skills read from it (kept in memory while their files' stats hold), the
stored history, and from them the system prompt and the message list.
"""

from __future__ import annotations

from agent_core.bootstrap import PromptMode, Workspaces
from agent_core.compaction import summary_messages
from agent_core.history import prepare_history
from agent_core.input_guard import bound_input
from agent_core.messages import Message
from agent_core.orchestration.workspaces import resolve_run_workspace
from agent_core.prompt import build_system_prompt, skill_search_mode
from agent_core.run import RunRequest
from agent_core.run_state import RunState
from agent_core.settings import AgentSettings
from agent_core.store import SessionStore
from agent_core.tools.base import ToolRegistry
from agent_core.tools.skills import SKILL_SEARCH_NAME
from agent_core.tracing import Trace


async def prepare_run(
    settings: AgentSettings,
    tools: ToolRegistry,
    workspaces: Workspaces,
    store: SessionStore,
    request: RunRequest,
    trace: Trace,
    *,
    pricing: str = "",
) -> RunState:
    place = resolve_run_workspace(settings, request)
    mode = PromptMode.MINIMAL if request.minimal_prompt else PromptMode.FULL
    await workspaces.prepare_user_files(request.user_id)
    files, skills = await workspaces.load_prompt_inputs(
        request.user_id, mode, place.default, settings.skill_paths
    )
    history = await store.load_history(request.session_key)
    system = build_system_prompt(
        settings,
        request,
        tools,
        place.default,
        mode=mode,
        files=files,
        extra=request.extra_context,
        skill_list=skills,
        team_workspace=place.team,
        pricing=pricing,
    )
    messages = [Message.system(system)]
    turns = settings.history_limit if request.history_turns is None else request.history_turns
    if turns > 0:  # 0 for this run (a scheduled job's): no history, no summary of it
        if history.summary:
            messages += summary_messages(history.summary)
        messages += prepare_history(history.messages, turns)
    user = Message.user(bound_input(request.message, settings.max_message_chars), request.images)
    # History gets the images' notes (their saved paths), never their bytes.
    stored_user = user.with_image_notes()
    messages.append(user if settings.vision else stored_user)
    state = RunState(
        request=request,
        trace=trace,
        messages=messages,
        buffer=[stored_user],
        stored=history.messages,
        summary=history.summary,
        place=place,
        skills=skills,
    )
    if skill_search_mode(skills, tools, mode):  # section 9: offered from the start
        state.discovered.add(SKILL_SEARCH_NAME)
    return state
