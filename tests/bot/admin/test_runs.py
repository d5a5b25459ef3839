"""Live runs for the dashboard (``bot/admin/runs.py``): the chat a session key names, what
:class:`RunTracker` makes of run events, and stopping a run from the dashboard."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agent_core import Event, EventType
from bot.admin import runs as runs_module
from bot.admin.runs import RunTracker
from bot.app import Loopgate
from bot.pipeline.run_registry import ActiveRun
from bot.pipeline.session_keys import chat_of
from channels import ChatRef, ChatType
from channels.local import Outbound

KEY = "agent:main:web:direct:dm-alice"


class Handle:
    """A run's task as the registry holds it: records the cancel."""

    def __init__(self) -> None:
        self.cancelled = 0

    def cancel(self, msg: Any | None = None) -> bool:
        self.cancelled += 1
        return True

    def cancelling(self) -> int:
        return self.cancelled


def register(app: Loopgate, run_id: str, key: str = KEY, parent: str | None = None) -> Handle:
    handle = Handle()
    app.registry.register(ActiveRun(run_id, "main", key, "alice", handle, parent_run_id=parent))
    return handle


async def publish(app: Loopgate, kind: EventType, run_id: str, **payload: Any) -> None:
    await app.events.publish(Event(kind, run_id, KEY, payload))


@pytest.fixture
def tracker(app: Loopgate) -> Iterator[RunTracker]:
    tracker = RunTracker(app)
    yield tracker
    tracker.close()


class TestChatOf:
    def test_chat_of_a_session_key(self) -> None:
        assert chat_of("agent:main:telegram:group:-100:topic:7") == ChatRef(
            "telegram", "-100", ChatType.GROUP, "7"
        )
        assert chat_of("agent:main:web:direct:a:b") == ChatRef("web", "a:b", ChatType.DIRECT)
        assert chat_of("nonsense") is None

    def test_keys_that_name_no_chat(self) -> None:
        for key in (
            "",
            "agent:main:web:direct",  # too short
            "session:main:web:direct:a",  # not an agent key
            "agent:main:web:channel:a",  # no such chat type
        ):
            assert chat_of(key) is None, key


class TestTracker:
    async def test_phase_and_running_tools_follow_the_events(
        self, app: Loopgate, tracker: RunTracker
    ) -> None:
        register(app, "r1")
        await publish(app, EventType.RUN_STARTED, "r1")
        await publish(app, EventType.ACTIVITY, "r1", phase="tool_exec", iteration=1)
        await publish(app, EventType.TOOL_CALL, "r1", id="a", name="read_file")
        await publish(app, EventType.TOOL_CALL, "r1", id="b", name="list_files")
        await publish(app, EventType.TOOL_CALL, "r1", id="c", name="list_files")
        [row] = tracker.runs()
        assert (row["phase"], row["current_tool"]) == ("tool_exec", "list_files, read_file")
        await publish(app, EventType.TOOL_RESULT, "r1", id="a")
        assert tracker.runs()[0]["current_tool"] == "list_files"
        await publish(app, EventType.RUN_COMPLETED, "r1")
        [row] = tracker.runs()  # still registered while the answer goes out
        assert (row["phase"], row["current_tool"]) == ("delivering", None)

    async def test_rows_of_registered_runs_only_oldest_first(
        self, app: Loopgate, tracker: RunTracker
    ) -> None:
        await publish(app, EventType.RUN_STARTED, "gone")  # never registered: not shown
        register(app, "old", "agent:main:telegram:group:-100:topic:7")
        assert [r["run_id"] for r in tracker.runs()] == ["old"]
        register(app, "new", "odd-key", parent="old")
        rows = tracker.runs()
        assert [r["run_id"] for r in rows] == ["old", "new"]
        assert (rows[0]["channel"], rows[0]["chat_type"], rows[0]["chat_id"]) == (
            "telegram",
            "group",
            "-100",
        )
        assert rows[0]["thread_id"] == "7" and rows[0]["requester_id"] == "alice"
        assert (rows[1]["channel"], rows[1]["chat_id"], rows[1]["thread_id"]) == ("", "", None)
        assert rows[1]["parent_run_id"] == "old"
        app.registry.unregister("old")
        assert [r["run_id"] for r in tracker.runs()] == ["new"]

    async def test_ended_runs_are_forgotten_at_the_next_start(
        self, app: Loopgate, tracker: RunTracker, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        await publish(app, EventType.ACTIVITY, "r1", phase="thinking")
        await publish(app, EventType.RUN_STARTED, "r2")  # r1 seen just now: kept
        register(app, "r1")
        assert tracker.runs()[0]["phase"] == "thinking"
        app.registry.unregister("r1")
        monkeypatch.setattr(runs_module, "FORGET_AFTER", -1.0)  # every record is old now
        await publish(app, EventType.RUN_STARTED, "r3")
        register(app, "r1")  # the same id again starts from nothing
        assert tracker.runs()[0]["phase"] == ""

    async def test_close_stops_listening(self, app: Loopgate, tracker: RunTracker) -> None:
        register(app, "r1")
        tracker.close()
        await publish(app, EventType.ACTIVITY, "r1", phase="thinking")
        assert tracker.runs()[0]["phase"] == ""


class TestStop:
    async def test_stops_the_run_and_tells_the_chat(
        self, app: Loopgate, tracker: RunTracker
    ) -> None:
        told: list[Outbound] = []

        async def record(outbound: Outbound) -> None:
            told.append(outbound)

        app.web.listen("dm-alice", record)
        handle = register(app, "r1")
        assert await tracker.stop("r1", by="admin (bearer)")
        assert handle.cancelled == 1
        assert [(o.kind, o.text) for o in told] == [("message", app.config.bot.stop_reply)]
        assert told[0].chat == ChatRef("web", "dm-alice", ChatType.DIRECT)

    async def test_a_child_run_stops_without_a_message(
        self, app: Loopgate, tracker: RunTracker
    ) -> None:
        told: list[Outbound] = []

        async def record(outbound: Outbound) -> None:
            told.append(outbound)

        app.web.listen("dm-alice", record)
        parent = register(app, "parent")
        child = register(app, "child", parent="parent")
        assert await tracker.stop("child", by="admin (bearer)")
        assert (child.cancelled, parent.cancelled) == (1, 0)
        assert told == []

    async def test_not_running(self, app: Loopgate, tracker: RunTracker) -> None:
        assert not await tracker.stop("nope", by="admin (bearer)")

    async def test_a_chat_on_no_channel_is_still_stopped(
        self, app: Loopgate, tracker: RunTracker
    ) -> None:
        handle = register(app, "r1", "agent:main:nochannel:direct:x")
        assert await tracker.stop("r1", by="admin (bearer)")
        assert handle.cancelled == 1
