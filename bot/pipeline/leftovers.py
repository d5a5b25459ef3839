"""What a killed process left behind in a chat, and how the turn that replays it deals with it.

- **Preview messages** of a streamed answer (recorded in the inbox entry as they were posted):
  deleted before the answer is given again, so only one answer stays visible.
- **The chunk in doubt**: a saved answer's next chunk may have gone out just before the kill,
  unrecorded. Where the platform can be asked (:class:`~channels.SentLookup`: Slack's
  history), the replay asks before sending it again; Telegram and Zalo can't be asked
  (docs/deploys.md).
"""

from __future__ import annotations

import structlog

from bot.pipeline.delivery import WasSent
from bot.pipeline.job import Job
from bot.storage.inbox import SqlInbox
from channels import Channel, MessageEditor, MessageRef, SentLookup

log = structlog.get_logger(__name__)


async def remove_previews(job: Job, channel: Channel, inbox: SqlInbox | None) -> None:
    """Delete the half answer a killed process's stream left in the chat. A preview that can't
    be deleted stays (logged)."""
    for message_id in job.previews:
        ref = MessageRef(job.message.chat, message_id)
        try:
            removed = isinstance(channel, MessageEditor) and await channel.delete_message(ref)
        except Exception as exc:
            removed = False
            log.info("stream.stale_preview_delete_failed", error=str(exc))
        log.info(
            "stream.stale_preview",
            entry=job.inbox_id,
            channel=channel.name,
            message_id=message_id,
            removed=removed,
        )
    job.previews = []
    if inbox is not None and job.inbox_id is not None:
        try:
            await inbox.set_previews(job.inbox_id, [])
        except Exception as exc:  # at worst the next replay tries to delete them again
            log.warning("inbox.update_failed", entry=job.inbox_id, error=str(exc))


def sent_lookup(job: Job, channel: Channel) -> WasSent | None:
    """For a replayed saved answer on a channel that can be asked: did the killed process send
    the next chunk after all? None when there is nothing to ask."""
    since = job.saved_at
    if since is None or not isinstance(channel, SentLookup):
        return None

    async def was_sent(text: str, quote: str | None) -> MessageRef | None:
        try:
            found = await channel.find_sent(job.message.chat, text, since=since, reply_to=quote)
        except Exception as exc:  # can't tell: sending again beats never answering
            log.warning("delivery.check_failed", entry=job.inbox_id, error=str(exc))
            return None
        if found is not None:
            log.info("delivery.already_sent", entry=job.inbox_id, message_id=found.message_id)
        return found

    return was_sent
