"""``loopgate prompt``: print the system prompt an agent would get, with section markers."""

from __future__ import annotations

from datetime import UTC, datetime

from agent_core import (
    AGENT_LEVEL_FILES,
    MINIMAL_FILES,
    STANDARD_FILES,
    USER_MD,
    AgentType,
    ContextFile,
    EventBus,
    FileStamp,
    MemoryHit,
    MemoryStore,
    PromptContext,
    PromptMode,
    RunRequest,
    Workspaces,
    find_skills,
    render_with_markers,
    truncate_for_prompt,
)
from agent_core.orchestration import Orchestrator
from bot.agents.exec_setup import ExecRuntime
from bot.agents.router import AgentRouter
from bot.config import Config
from bot.usage.pricing import configured_price, table_price


def preview_files(workspaces: Workspaces, user_id: str, mode: PromptMode) -> list[ContextFile]:
    """The user's files when their workspace exists, else what a first chat would seed.

    Nothing is written: previewing must not seed a workspace.
    """
    if workspaces.user_dir(user_id).exists():
        return workspaces.context_files(user_id, mode)
    names = MINIMAL_FILES if mode is PromptMode.MINIMAL else STANDARD_FILES
    files = []
    for name in names:
        agent_level = workspaces.agent_type is AgentType.PREDEFINED and name in AGENT_LEVEL_FILES
        path = (workspaces.agent_dir() if agent_level else workspaces.user_dir(user_id)) / name
        if workspaces.agent_type is AgentType.PREDEFINED and not agent_level and name != USER_MD:
            continue
        text = path.read_text(encoding="utf-8") if path.is_file() else workspaces.template(name)
        content, cut = truncate_for_prompt(name, text, workspaces.max_chars)
        files.append(ContextFile(name, content, path, cut))
    return files


class _PreviewMemoryIndex:
    """Never searched: lets the preview list the memory tools a served agent has."""

    async def search(self, workspace_key: str, query: str, limit: int) -> list[MemoryHit]:
        return []

    async def stamps(self, workspace_key: str) -> dict[str, FileStamp]:
        return {}

    async def reindex(self, workspace_key: str, files: object, removed: object = ()) -> None:
        return None


def render_prompt(
    config: Config,
    agent_id: str,
    *,
    channel: str,
    chat_type: str,
    user_id: str = "preview-user",
    mode: str = "full",
    exec_runtime: ExecRuntime | None = None,
) -> str:
    """``exec_runtime``: the probed sandbox of ``tools.exec``; ``exec`` and its prompt
    sections are shown when it is available (the caller probes: ``prepare_exec``)."""
    store = MemoryStore()
    router = AgentRouter(
        config,
        store=store,
        traces=store,
        events=EventBus(),
        memory_index=_PreviewMemoryIndex(),
        exec_runtime=exec_runtime,
    )
    # The preview reads no database: the agent is shown in spawn mode, with spawn offered.
    router.orchestrator = Orchestrator(router.resolve, router.events)
    settings = router.settings(agent_id)
    tools = router.tools.clone()
    router.add_orchestration_tools(settings, tools)
    if "exec" not in router.disabled_tools(agent_id):
        settings, _ = router.add_exec_tool(settings, tools)
    for tool in router.web.tools:  # tools.web: built without a connection, nothing to close
        tools.register(tool)
    prompt_mode = PromptMode(mode)
    workspaces = Workspaces(
        settings.workspace,
        settings.id,
        settings.agent_type,
        templates_dir=settings.bootstrap_templates,
        max_chars=settings.context_file_max_chars,
    )
    request = RunRequest(
        session_key=f"agent:{agent_id}:{channel}:{chat_type}:preview",
        message="",
        user_id=user_id,
        agent_id=agent_id,
        channel=channel,
        chat_type=chat_type,
    )
    workspace = workspaces.user_dir(user_id)
    ctx = PromptContext(
        settings,
        request,
        tools,
        workspace,
        datetime.now(UTC),
        mode=prompt_mode,
        files=tuple(preview_files(workspaces, user_id, prompt_mode)),
        skills=find_skills(workspace, settings.skill_paths),
        pricing=price_note(config, settings.provider, settings.model),
    )
    return render_with_markers(ctx)


def price_note(config: Config, provider: str, model: str) -> str:
    """The Runtime section's price line, as a run gets it (``bot/usage/pricing.py``)."""
    provider_config = config.providers.all().get(provider)
    if provider_config is not None and provider_config.pricing is not None:
        return configured_price(provider_config.pricing).note()
    base_url = provider_config.base_url if provider_config is not None else None
    price = table_price(provider, base_url, model)
    return price.note() if price is not None else ""
