"""The stop service (``stop.py``) on its own: what ``/stop`` and ``/stopall`` cancel and drop,
the dashboard's ``abort``, and the hand-off to the process holding a session. The gateway's
tests (``test_gateway.py``) cover the same rules through ``Gateway.handle``."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.config import parse_config
from bot.pipeline.stop import STOPALL_REASON, StopService
from channels import ChatType
from tests.bot.pipeline.test_bursts_units import turns
from tests.pipeline_support import DM, GROUP, RecordingChannel, message, settled


@dataclass
class FakeWork:
    """The cluster's side of ``/stopall``: what was asked of the session's holder."""

    asked: list[tuple[str, str, bool]] = field(default_factory=list)

    def dispatch(self, job: object) -> None:
        raise AssertionError("not used here")

    def claim_soon(self, session_key: str) -> None:
        raise AssertionError("not used here")

    async def drop_waiting(self, session_key: str, sender: str, *, admin: bool) -> None:
        self.asked.append((session_key, sender, admin))


CONFIG = parse_config({"bot": {"admins": ["root"]}}, {})


async def test_stop_cancels_the_senders_newest_run_and_stopall_drops_the_queue() -> None:
    async with turns(queue_mode="followup") as t:  # each message its own turn
        t.hold = True
        first, second, queued = t.job("first"), t.job("second"), t.job("queued")
        t.submit(first)
        await t.wait_for(lambda: t.started == [first])
        t.submit(second, queued)  # DMs run one at a time: both wait in the queue
        stop = StopService(CONFIG, t.registry, t.bursts)
        channel = RecordingChannel()

        reply = await stop.command(message("/stop"), channel, first.session_key, everything=False)
        assert reply == CONFIG.bot.stop_reply
        await settled(first.done)
        # The queue moved on; /stopall now cancels the running one and drops what waits.
        await t.wait_for(lambda: len(t.started) == 2)
        reply = await stop.command(message("/stopall"), channel, first.session_key, everything=True)
        assert reply == CONFIG.bot.stop_reply
        await settled(second.done, queued.done)
        assert [job.message.text for job in t.drops] == ["queued"]
        assert queued.drop_reason == STOPALL_REASON
        assert stop.work is None


async def test_nothing_to_stop_and_not_allowed_replies() -> None:
    async with turns() as t:
        t.hold = True
        alice = t.job("alice's", chat=GROUP, sender="alice")
        t.submit(alice)
        await t.wait_for(lambda: t.started == [alice])
        stop = StopService(CONFIG, t.registry, t.bursts)
        channel = RecordingChannel()
        bob = message("/stop", chat=GROUP, sender="bob")
        assert bob.chat.chat_type is ChatType.GROUP
        reply = await stop.command(bob, channel, alice.session_key, everything=False)
        assert reply == CONFIG.bot.not_allowed_reply
        assert not alice.done.done()
        root = message("/stop", chat=GROUP, sender="root")  # bot.admins
        reply = await stop.command(root, channel, alice.session_key, everything=False)
        assert reply == CONFIG.bot.stop_reply
        await settled(alice.done)
        reply = await stop.command(message("/stop"), channel, alice.session_key, everything=False)
        assert reply == CONFIG.bot.nothing_to_stop_reply


async def test_stopall_asks_the_process_holding_the_session() -> None:
    async with turns() as t:
        work = FakeWork()
        stop = StopService(CONFIG, t.registry, t.bursts, work=work)
        key = t.job("x").session_key
        reply = await stop.command(
            message("/stopall", chat=DM), RecordingChannel(), key, everything=True
        )
        assert work.asked == [(key, "alice", True)]  # in a direct chat the sender may stop all
        assert reply == CONFIG.bot.nothing_to_stop_reply  # nothing ran or waited here


async def test_abort_is_the_dashboards_stop() -> None:
    async with turns() as t:
        t.hold = True
        job = t.job("long")
        t.submit(job)
        await t.wait_for(lambda: t.started == [job])
        stop = StopService(CONFIG, t.registry, t.bursts)
        assert not stop.abort("no-such-run", job.session_key)
        assert stop.abort(job.run_id, job.session_key)
        await settled(job.done)
