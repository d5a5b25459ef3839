"""What a Slack stream needs from the channel that opened it, as protocols.

:class:`channels.slack._channel.SlackChannel` satisfies :class:`StreamHost` structurally and
:class:`channels.slack._streaming.SlackStream` satisfies :class:`StreamTarget`;
:mod:`channels.slack._streaming` depends on these instead of on the channel that imports it.
"""

from __future__ import annotations

from typing import Protocol

from slack_sdk.web.async_client import AsyncWebClient

from channels.errors import ChannelError
from channels.slack._status import ThreadStatus
from channels.types import ChatRef, MessageRef

__all__ = ["StreamHost", "StreamTarget"]


class StreamTarget(Protocol):
    """Where a stream goes, as the channel reads it when Slack refuses the stream."""

    @property
    def chat(self) -> ChatRef: ...

    @property
    def recipient_team(self) -> str: ...


class StreamHost(Protocol):
    """The channel's side of a :class:`~channels.slack._streaming.SlackStream`."""

    @property
    def client(self) -> AsyncWebClient: ...

    @property
    def status(self) -> ThreadStatus: ...

    async def pace(self, channel_id: str) -> None: ...

    def stream_refused(self, stream: StreamTarget, exc: ChannelError) -> None: ...

    def stream_started(self, channel_id: str, thread_ts: str, ts: str) -> None: ...

    async def delete_message(self, message: MessageRef) -> bool: ...
