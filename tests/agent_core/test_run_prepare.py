"""agent_core/run_prepare.py: a run's start: the user's files seeded, the messages of the first
model call (system prompt, summary, bounded history, bounded user message) and the run state."""

from __future__ import annotations

from pathlib import Path

from agent_core import FILE_TOOLS, AgentSettings, MemoryStore, RunRequest, ToolRegistry
from agent_core.bootstrap import Workspaces
from agent_core.compaction import SUMMARY_ACK, SUMMARY_PREFIX
from agent_core.input_guard import TRUNCATION_NOTE
from agent_core.messages import ImagePart, Message, ToolCall, Usage
from agent_core.orchestration import Team
from agent_core.orchestration.modes import OrchestrationMode, OrchestrationProfile
from agent_core.prompt import SKILLS_INLINE_MAX
from agent_core.run_prepare import prepare_run
from agent_core.run_state import RunState
from agent_core.tools.skills import SKILL_SEARCH_NAME, SKILL_TOOLS
from agent_core.tracing import new_trace
from agent_core.workspace import user_workspace
from tests.agent_core.test_skills import many_skills


def settings(tmp_path: Path, **kw: object) -> AgentSettings:
    return AgentSettings(id="main", model="m", workspace=tmp_path / "ws", **kw)  # type: ignore[arg-type]


async def prepare(
    agent: AgentSettings,
    request: RunRequest,
    *,
    store: MemoryStore | None = None,
    tools: ToolRegistry | None = None,
) -> RunState:
    return await prepare_run(
        agent,
        tools if tools is not None else ToolRegistry.of(FILE_TOOLS),
        Workspaces(agent.workspace, agent.id),
        store or MemoryStore(),
        request,
        new_trace(request.run_id, request.session_key, agent.id),
    )


async def stored(store: MemoryStore, key: str, *messages: Message) -> None:
    await store.append_run(
        key, list(messages), run_id="old", usage=Usage(), model="m", provider="p"
    )


def roles_and_texts(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


async def test_a_first_run_is_the_system_prompt_and_the_message(tmp_path: Path) -> None:
    agent = settings(tmp_path)
    request = RunRequest("s", "hello", "alice")
    state = await prepare(agent, request)
    system, user = state.messages
    assert system.role == "system" and "hello" not in system.content
    assert (user.role, user.content) == ("user", "hello")
    assert state.buffer == [user]  # what the session gets at the end of the run
    assert state.request is request and state.stored == [] and state.summary is None
    assert state.place is not None
    assert state.place.default == user_workspace(agent.workspace, "alice")
    # The user's files were seeded before the prompt read them.
    assert (state.place.default / "SOUL.md").is_file()
    assert "SOUL.md" in system.content


async def test_the_summary_then_the_history_come_before_the_message(tmp_path: Path) -> None:
    store = MemoryStore()
    await stored(store, "s", Message.user("earlier"), Message.assistant("reply"))
    await store.set_summary("s", "they talked about tea", keep_last=2)
    state = await prepare(settings(tmp_path), RunRequest("s", "now", "alice"), store=store)
    assert roles_and_texts(state.messages[1:]) == [
        ("user", SUMMARY_PREFIX + "they talked about tea"),
        ("assistant", SUMMARY_ACK),
        ("user", "earlier"),
        ("assistant", "reply"),
        ("user", "now"),
    ]
    assert state.summary == "they talked about tea"
    assert roles_and_texts(state.stored) == [("user", "earlier"), ("assistant", "reply")]


async def test_history_is_cut_to_the_last_turns_and_repaired(tmp_path: Path) -> None:
    store = MemoryStore()
    dangling = ToolCall("c1", "read_file", "{}")
    await stored(
        store,
        "s",
        Message.user("one"),
        Message.assistant("1"),
        Message.user("two"),
        Message.assistant("2"),
        Message.user("three"),
        Message.assistant(tool_calls=(dangling,)),  # its result was never stored
    )
    state = await prepare(
        settings(tmp_path, history_limit=2), RunRequest("s", "four", "alice"), store=store
    )
    sent = state.messages[1:]
    assert [m.content for m in sent if m.role == "user"] == ["two", "three", "four"]
    assert [m.tool_call_id for m in sent if m.role == "tool"] == ["c1"]  # answered for the model
    assert len(state.stored) == 6  # the session itself is left as it is


async def test_a_long_message_is_bounded_and_says_so(tmp_path: Path) -> None:
    state = await prepare(settings(tmp_path, max_message_chars=10), RunRequest("s", "x" * 25, "u"))
    user = state.messages[-1]
    assert user.content == "x" * 10 + TRUNCATION_NOTE.format(n=25, limit=10)
    assert state.buffer == [user]


async def test_a_minimal_prompt_reads_only_the_minimal_files(tmp_path: Path) -> None:
    agent = settings(tmp_path)
    full = await prepare(agent, RunRequest("s", "hi", "alice"))
    minimal = await prepare(agent, RunRequest("s/spawn/1", "hi", "alice", minimal_prompt=True))
    assert "SOUL.md" in full.messages[0].content
    assert "SOUL.md" not in minimal.messages[0].content
    assert "AGENTS.md" in minimal.messages[0].content


async def test_the_parents_brief_reaches_the_prompt(tmp_path: Path) -> None:
    request = RunRequest("s", "hi", "u", extra_context="Only look at invoices from March.")
    state = await prepare(settings(tmp_path), request)
    assert "Only look at invoices from March." in state.messages[0].content


async def test_a_team_lead_works_in_the_team_workspace(tmp_path: Path) -> None:
    team = Team("crew", lead="main", members=("helper",))
    agent = settings(tmp_path, orchestration=OrchestrationProfile(OrchestrationMode.TEAM, team))
    state = await prepare(agent, RunRequest("s", "hi", "alice", chat_id="web:room"))
    assert state.place is not None and state.place.team is not None
    assert state.place.default == state.place.team
    assert state.place.extra_roots == (user_workspace(agent.workspace, "alice"),)
    assert str(state.place.team) in state.messages[0].content


async def test_many_skills_offer_skill_search_from_the_start(tmp_path: Path) -> None:
    agent = settings(tmp_path)
    many_skills(user_workspace(agent.workspace, "alice") / "skills", SKILLS_INLINE_MAX + 1)
    tools = ToolRegistry.of(FILE_TOOLS)
    for tool in SKILL_TOOLS:
        tools.defer(tool)
    state = await prepare(agent, RunRequest("s", "hi", "alice"), tools=tools)
    assert len(state.skills) == SKILLS_INLINE_MAX + 1
    assert SKILL_SEARCH_NAME in state.discovered
    few = await prepare(agent, RunRequest("s", "hi", "bob"), tools=tools)  # bob has no skills
    assert few.skills == () and few.discovered == set()


PHOTO = ImagePart("cat.jpg", "inbox/cat.jpg", 1280, 960, "image/jpeg", b"\xff\xd8")


async def test_images_go_to_the_model_and_only_their_notes_to_history(tmp_path: Path) -> None:
    state = await prepare(settings(tmp_path), RunRequest("s", "what?", "alice", images=(PHOTO,)))
    user = state.messages[-1]
    assert user.content == "what?" and user.images == (PHOTO,)
    (kept,) = state.buffer
    assert kept.images == ()
    assert kept.content == "what?\n[image: cat.jpg, 1280×960, saved to inbox/cat.jpg]"


async def test_without_vision_the_model_gets_the_note_instead_of_the_image(
    tmp_path: Path,
) -> None:
    agent = settings(tmp_path, vision=False)
    state = await prepare(agent, RunRequest("s", "what?", "alice", images=(PHOTO,)))
    user = state.messages[-1]
    assert user.images == ()
    assert user.content == "what?\n[image: cat.jpg, 1280×960, saved to inbox/cat.jpg]"
