"""Status reactions (``reactions.py``), against the local channel."""

from __future__ import annotations

from bot.pipeline.reactions import ReactionState, StatusReactions
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
