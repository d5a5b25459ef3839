"""Status reactions (``reactions.py``), against the local channel."""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from bot.pipeline.reactions import ReactionCleanups, ReactionState, StatusReactions
from channels import MessageRef
from tests.pipeline_support import LOCAL_CHAT as CHAT
from tests.pipeline_support import local_recorder as recording_channel
from tests.waiting import wait_until


class TestReactions:
    async def test_received_progress_then_cleared(self) -> None:
        channel, records = recording_channel()
        reactions = StatusReactions(channel, MessageRef(CHAT, "m1"), debounce=0.01)
        await reactions.received()
        reactions.progress(ReactionState.THINKING)
        reactions.progress(ReactionState.TOOL)  # debounced: only the latest shows
        await wait_until(lambda: any(r.text == "👨‍💻" for r in records))
        await reactions.finish(ok=True)
        seen = [(r.kind, r.text) for r in records]
        assert seen == [
            ("reaction", "👀"),
            ("reaction_removed", "👀"),
            ("reaction", "👨‍💻"),
            ("reaction_removed", "👨‍💻"),
        ]

    async def test_final_mode_leaves_terminal_state_even_when_pending(self) -> None:
        channel, records = recording_channel()
        reactions = StatusReactions(channel, MessageRef(CHAT, "m1"), cleanup="final", debounce=1)
        await reactions.received()
        reactions.progress(ReactionState.THINKING)  # still pending when the run ends
        await reactions.finish(ok=False)
        await wait_until(lambda: len(records) >= 3)
        assert [(r.kind, r.text) for r in records] == [
            ("reaction", "👀"),
            ("reaction_removed", "👀"),
            ("reaction", "😢"),
        ]

    async def test_channel_without_reactions_is_skipped(self) -> None:
        channel, records = recording_channel(reactions=False)
        reactions = StatusReactions(channel, MessageRef(CHAT, "m1"))
        await reactions.received()
        await reactions.finish(ok=True)
        assert records == []


class TestReactionCleanups:
    async def test_a_shutdown_waits_for_the_cleanups_under_way_then_cancels_the_rest(
        self,
    ) -> None:
        channel, records = recording_channel()
        removing = channel.remove_reaction
        stuck = MessageRef(CHAT, "stuck")

        async def removal(message: MessageRef, emoji: str) -> None:
            await asyncio.sleep(3600 if message == stuck else 0.05)  # "stuck" never answers
            await removing(message, emoji)

        channel.remove_reaction = removal  # type: ignore[method-assign]
        cleanups = ReactionCleanups()
        for ref in (MessageRef(CHAT, "m1"), stuck):
            reactions = StatusReactions(channel, ref)
            await reactions.received()
            cleanups.finish_soon(reactions, ok=True)
        assert cleanups.pending == 2
        await asyncio.wait_for(cleanups.aclose(grace=0.5), 5)
        removed = [r.message_id for r in records if r.kind == "reaction_removed"]
        assert removed == ["m1"]  # the slow one was waited for, the stuck one given up
        assert cleanups.pending == 0

    async def test_nothing_is_started_where_reactions_are_off(self) -> None:
        channel, records = recording_channel(reactions=False)
        cleanups = ReactionCleanups()
        cleanups.finish_soon(StatusReactions(channel, MessageRef(CHAT, "m1")), ok=True)
        assert cleanups.pending == 0
        assert records == []

    async def test_a_failed_cleanup_is_logged_and_forgotten(self) -> None:
        channel, _ = recording_channel()

        class Broken(StatusReactions):
            async def finish(self, ok: bool) -> None:
                raise RuntimeError("platform down")

        cleanups = ReactionCleanups()
        with capture_logs() as logs:
            cleanups.finish_soon(Broken(channel, MessageRef(CHAT, "m1")), ok=True)
            assert await cleanups.flushed(5) == set()
        assert cleanups.pending == 0
        failed = [e for e in logs if e["event"] == "reaction.cleanup_failed"]
        assert len(failed) == 1 and "platform down" in failed[0]["error"]
