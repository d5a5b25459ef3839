"""Streamed replies: the answer grows in place on the platform while the model writes it."""

from bot.pipeline.streaming.reply import StreamedReply, StreamOptions, streaming_options

__all__ = ["StreamOptions", "StreamedReply", "streaming_options"]
