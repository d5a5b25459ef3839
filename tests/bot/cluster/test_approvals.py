"""``/approve`` and ``/deny`` across processes (``bot/cluster/approvals.py``).

Two Loopgate instances on one Postgres schema and one Redis, the fake model calling ``exec``
in the bwrap sandbox: the command waits in B, the answer reaches A. Then the relay alone on two
Redis links (two processes' views of one cluster): holders that died or do not confirm, stray
messages, and the per-chat record of waiting commands."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from redis.asyncio import Redis
from structlog.testing import capture_logs

from agent_core import ExecProfile, RunResult, Verdict
from bot.app import Loopgate
from bot.cluster.approvals import CONFIRM_WITHIN, ClusterApprovals
from bot.cluster.connection import RedisLink
from bot.pipeline.approvals import ExecApprovals
from channels import ChatRef, ChatType, InboundMessage, Sender
from tests.approval_support import COMMAND, alice_asks, tool_result
from tests.cluster_support import REDIS_URL, ClusterConfig, needs_postgres, needs_redis
from tests.conftest import ChatDriver
from tests.exec_support import needs_bwrap
from tests.fakes.llm_server import FakeLLM, call, text, tool_calls
from tests.pipeline_support import RecordingChannel
from tests.waiting import wait_until

ROOM = ChatRef("web", "room-1", ChatType.GROUP)


def proof(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "workspaces").rglob("proof.txt"))


@needs_redis
@needs_postgres
@needs_bwrap
class TestTwoProcesses:
    @pytest.fixture
    async def pair(
        self, cluster_config: ClusterConfig, tmp_path: Path
    ) -> AsyncIterator[tuple[Loopgate, Loopgate]]:
        cfg = cluster_config(
            agents={
                "defaults": {"workspace": str(tmp_path / "workspaces"), "owner_ids": ["web:owner"]}
            },
            bot={"admins": ["carol"]},
            tools={"exec": {"enabled": True, "timeout": 5, "approval_timeout": 20}},
        )
        async with AsyncExitStack() as stack:
            a = await stack.enter_async_context(Loopgate(cfg))
            b = await stack.enter_async_context(Loopgate(cfg))
            yield a, b

    @pytest.fixture
    def in_a(self, pair: tuple[Loopgate, Loopgate]) -> ChatDriver:
        """A's view of the chat, where the answers are given."""
        return ChatDriver(pair[0], ROOM)

    async def asked_in(self, b: Loopgate) -> tuple[ChatDriver, asyncio.Future[RunResult | None]]:
        """Alice asks in B; returns B's view of the chat and the run, once the request is
        posted (so the command waits in B)."""
        in_b = ChatDriver(b, ROOM)
        done = await in_b.send("please run it", sender="alice")
        assert done is not None
        await in_b.wait_for(lambda: any("/approve" in t for t in in_b.texts()))
        return in_b, done

    async def test_approve_in_a_runs_the_command_waiting_in_b(
        self, pair: tuple[Loopgate, Loopgate], in_a: ChatDriver, llm: FakeLLM, tmp_path: Path
    ) -> None:
        _, b = pair
        llm.script(tool_calls(call("exec", {"command": COMMAND})), text("done"))
        in_b, done = await self.asked_in(b)
        assert await in_a.send("/approve", sender="owner") is None
        assert in_a.texts() == ["Approved: the command runs now."]
        result = await asyncio.wait_for(done, 10)
        assert result is not None and result.content == "done"
        assert "exit code: 0" in tool_result(llm) and "finished" in tool_result(llm)
        assert proof(tmp_path)
        assert not any(t.startswith("No answer within") for t in in_b.texts())

    async def test_deny_in_a_keeps_it_from_running(
        self, pair: tuple[Loopgate, Loopgate], in_a: ChatDriver, llm: FakeLLM, tmp_path: Path
    ) -> None:
        _, b = pair
        llm.script(tool_calls(call("exec", {"command": COMMAND})), text("ok, not run"))
        _, done = await self.asked_in(b)
        await in_a.send("/deny", sender="owner")
        assert in_a.texts() == ["Denied: the command will not run."]
        await asyncio.wait_for(done, 10)
        assert "refused to run it (/deny)" in tool_result(llm)
        assert not proof(tmp_path)
        # Answered: nothing waits anywhere any more.
        await in_a.send("/approve", sender="owner")
        assert in_a.texts()[-1] == "No command is waiting for approval here."

    async def test_a_non_admin_in_a_is_refused_and_it_keeps_waiting(
        self, pair: tuple[Loopgate, Loopgate], in_a: ChatDriver, llm: FakeLLM, tmp_path: Path
    ) -> None:
        _, b = pair
        llm.script(tool_calls(call("exec", {"command": COMMAND})), text("done"))
        _, done = await self.asked_in(b)
        await in_a.send("/approve", sender="mallory")
        assert in_a.texts() == ["Only an owner or admin of this agent may answer."]
        await in_a.send("/approve", sender="mallory", admin=True)  # a group admin is no owner
        assert in_a.texts()[-1] == "Only an owner or admin of this agent may answer."
        await asyncio.sleep(0.3)  # kept (negative check): the command still waits, not run
        assert not done.done() and not proof(tmp_path)
        await in_a.send("/approve", sender="carol")  # bot.admins may
        assert in_a.texts()[-1] == "Approved: the command runs now."
        await asyncio.wait_for(done, 10)
        assert proof(tmp_path)

    async def test_nothing_waiting_anywhere_is_said_at_once(self, in_a: ChatDriver) -> None:
        started = time.monotonic()
        await in_a.send("/approve", sender="owner")
        assert time.monotonic() - started < CONFIRM_WITHIN  # no wait for a confirmation
        await in_a.send("/deny", sender="mallory")
        assert in_a.texts() == ["No command is waiting for approval here."] * 2


# -- the relay alone, on two Redis links -------------------------------------------------------

CHAT = ChatRef("web", "room-9", ChatType.GROUP, thread_id="t1")
KEY = ("web", "room-9", "t1")
CONFIRM = 1.5  # the relays' wait for a confirmation: short, but more than a loaded round trip
PROFILE = ExecProfile(
    "bwrap", "/workspace", False, 30, 1 << 29, 64, 1 << 14, None, 5.0, trusted=frozenset({"boss"})
)


def answer(sender: str) -> InboundMessage:
    return InboundMessage(CHAT, f"m-{time.monotonic_ns()}", Sender(sender, sender), "/approve")


def ask(approvals: ExecApprovals, command: str = "echo hi") -> asyncio.Task[Verdict | None]:
    return asyncio.create_task(approvals.ask(alice_asks(CHAT), command, PROFILE))


@needs_redis
class TestRelay:
    @pytest.fixture
    async def relays(
        self, links: tuple[RedisLink, RedisLink]
    ) -> AsyncIterator[list[tuple[ExecApprovals, RecordingChannel, ClusterApprovals]]]:
        made = []
        async with AsyncExitStack() as stack:
            for link in links:
                channel = RecordingChannel()
                approvals = ExecApprovals({"web": channel})
                relay = ClusterApprovals(link, confirm_within=CONFIRM)
                stack.push_async_callback(relay.aclose)
                await relay.attach(approvals)
                made.append((approvals, channel, relay))
            yield made

    async def members(self, relay: ClusterApprovals) -> list[bytes]:
        return list(await relay.link.client.zrange(relay._set_key(KEY), 0, -1))

    async def test_the_waiting_command_is_recorded_until_answered(
        self, relays: list[tuple[ExecApprovals, RecordingChannel, ClusterApprovals]]
    ) -> None:
        (a, _, relay_a), (b, channel_b, relay_b) = relays
        waiting = ask(b)
        await wait_until(lambda: bool(channel_b.texts()), 5)
        (held,) = b._waiting[KEY]
        assert await self.members(relay_a) == [f"{relay_b.link.process_id}|{held.id}".encode()]
        assert await a.answer(answer("boss"), approve=True) == "Approved: the command runs now."
        assert await asyncio.wait_for(waiting, 5) is Verdict.APPROVED
        assert await self.members(relay_a) == []  # settled: removed

    async def test_the_oldest_waiting_command_is_answered_first(
        self, relays: list[tuple[ExecApprovals, RecordingChannel, ClusterApprovals]]
    ) -> None:
        (a, _, _), (b, channel_b, _) = relays
        first = ask(b, "echo first")
        await wait_until(lambda: len(channel_b.texts()) == 1, 5)
        second = ask(b, "echo second")
        await wait_until(lambda: len(channel_b.texts()) == 2, 5)
        assert await a.answer(answer("boss"), approve=False) == "Denied: the command will not run."
        assert await asyncio.wait_for(first, 5) is Verdict.DENIED
        assert not second.done()
        assert await a.answer(answer("boss"), approve=True) == "Approved: the command runs now."
        assert await asyncio.wait_for(second, 5) is Verdict.APPROVED

    async def test_a_dead_holder_s_command_is_skipped_and_forgotten(
        self,
        relays: list[tuple[ExecApprovals, RecordingChannel, ClusterApprovals]],
    ) -> None:
        (a, _, relay_a), _ = relays
        client = relay_a.link.client
        # As a process killed while its command waited leaves it: nobody listens for it.
        await client.zadd(relay_a._set_key(KEY), {"ghost:1:abc|7": time.time() + 60})
        started = time.monotonic()
        assert await a.answer(answer("boss"), approve=True) == (
            "No command is waiting for approval here."
        )
        assert time.monotonic() - started < CONFIRM  # known at once, no wait for a confirmation
        assert await self.members(relay_a) == []

    async def test_a_holder_that_does_not_confirm_is_reported(
        self, relays: list[tuple[ExecApprovals, RecordingChannel, ClusterApprovals]]
    ) -> None:
        (a, _, relay_a), _ = relays
        mute: Redis = Redis.from_url(REDIS_URL)
        pubsub = mute.pubsub()
        try:
            # A live but stalled process: subscribed, never answering.
            await pubsub.subscribe(relay_a._inbox("stalled:2:def"))
            await relay_a.link.client.zadd(
                relay_a._set_key(KEY), {"stalled:2:def|3": time.time() + 60}
            )
            reply = await a.answer(answer("boss"), approve=True)
        finally:
            await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]
            await mute.aclose()
        assert reply.startswith("The command waiting here is held by another process")

    async def test_a_command_past_its_deadline_is_not_asked_for(
        self, relays: list[tuple[ExecApprovals, RecordingChannel, ClusterApprovals]]
    ) -> None:
        (a, _, relay_a), (_, _, relay_b) = relays
        member = f"{relay_b.link.process_id}|99"
        await relay_a.link.client.zadd(relay_a._set_key(KEY), {member: time.time() - 1})
        with capture_logs() as logs:
            reply = await a.answer(answer("boss"), approve=True)
        assert reply == "No command is waiting for approval here."
        assert not any(e["event"] == "exec.approval_answered_remotely" for e in logs)
        assert await self.members(relay_a) == []

    async def test_stray_messages_are_ignored(
        self, relays: list[tuple[ExecApprovals, RecordingChannel, ClusterApprovals]]
    ) -> None:
        (a, _, relay_a), (b, channel_b, relay_b) = relays
        with capture_logs() as logs:
            for junk in ("not json", "[1]", '{"op": "answer"}', '{"op": "outcome"}'):
                await relay_a.link.client.publish(relay_b.channel, junk)
            await wait_until(
                lambda: sum(e["event"] == "cluster.approvals_bad_message" for e in logs) == 4, 5
            )
        waiting = ask(b)  # still answered after them
        await wait_until(lambda: bool(channel_b.texts()), 5)
        assert await a.answer(answer("boss"), approve=True) == "Approved: the command runs now."
        assert await asyncio.wait_for(waiting, 5) is Verdict.APPROVED

    async def test_without_a_relay_nothing_leaves_the_process(self) -> None:
        approvals = ExecApprovals({"web": RecordingChannel()})
        assert approvals.relay is None
        assert await approvals.answer(answer("boss"), approve=True) == (
            "No command is waiting for approval here."
        )
