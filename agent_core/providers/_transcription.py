"""Speech to text through an OpenAI-compatible ``POST {base_url}/audio/transcriptions``.

The upload is the file as the user sent it (a Telegram voice message is OGG/Opus, which
Whisper-compatible servers take; converted to WAV only for a server that refuses it, see
:mod:`agent_core.audio`), in a ``multipart/form-data`` body with ``file`` and ``model``;
the answer asked for is ``response_format=json``, ``{"text": "..."}``. Like the chat providers it
makes one HTTP call and never retries, and only :class:`~agent_core.errors.ProviderError`
subclasses come out, with the API key redacted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import PurePath

import structlog

from agent_core.audio import WAV_MIME, AudioUnreadable, can_transcode, to_wav
from agent_core.errors import ProviderError, ProviderUnavailable, RateLimited
from agent_core.providers._transport import (
    decode_text,
    env_proxy,
    new_session,
    parse_retry_after,
    translate_errors,
)

log = structlog.get_logger(__name__)

DEFAULT_MODEL = "whisper-1"
REFUSED_FORMAT = frozenset({400, 415})
"""Statuses with which servers refuse an audio format (OpenAI: 400 "Invalid file format")."""
_MAX_ERROR_TEXT = 300


class Transcriber:
    """One transcription API: its URL, key and model."""

    def __init__(
        self,
        base_url: str,
        api_key: str = "",
        *,
        model: str = DEFAULT_MODEL,
        name: str = "transcription",
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
    ) -> None:
        self.name = name
        self.model = model
        self.url = base_url.rstrip("/") + "/audio/transcriptions"
        self._api_key = api_key
        self._timeouts = (timeout, connect_timeout)

    def __repr__(self) -> str:
        return f"Transcriber(name={self.name!r}, url={self.url!r}, model={self.model!r})"

    async def transcribe(self, audio: bytes, *, filename: str, mime: str) -> str:
        """The text spoken in ``audio``, uploaded as it is; when the server refuses it (HTTP
        400 or 415) and ffmpeg is installed, once more as WAV. Raises :class:`ProviderError`
        subclasses (the server's refusal when the audio can't be converted)."""
        try:
            return await self._upload(audio, filename=filename, mime=mime)
        except ProviderError as exc:
            if exc.status_code not in REFUSED_FORMAT or mime == WAV_MIME or not can_transcode():
                raise
            log.info("transcription.transcoding", provider=self.name, mime=mime, error=str(exc))
            try:
                wav = await to_wav(audio)
            except AudioUnreadable as unreadable:
                log.warning("transcription.transcode_failed", error=str(unreadable))
                raise exc from unreadable
        return await self._upload(wav, filename=f"{PurePath(filename).stem}.wav", mime=WAV_MIME)

    async def _upload(self, audio: bytes, *, filename: str, mime: str) -> str:
        import aiohttp

        form = aiohttp.FormData()
        form.add_field("file", audio, filename=filename, content_type=mime)
        form.add_field("model", self.model)
        form.add_field("response_format", "json")
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        # A session per call: voice messages are rare next to chat calls, and a session held
        # for them would need its own closing in the service's shutdown.
        with translate_errors(self.name, self._redact):
            async with new_session(self.url, *self._timeouts, env_proxy(self.url)) as session:
                request = session.post(self.url, data=form, headers=headers, allow_redirects=False)
                async with request as resp:
                    text = decode_text(await resp.read(), resp.charset)
                    if resp.status >= 400:
                        raise self._status_error(resp.status, resp.headers, text)
        transcript = self._parse(text)
        log.info("transcription.done", provider=self.name, bytes=len(audio), chars=len(transcript))
        return transcript

    def _parse(self, text: str) -> str:
        try:
            payload = json.loads(text)
        except ValueError:
            payload = None
        if not isinstance(payload, dict) or not isinstance(payload.get("text"), str):
            snippet = self._redact(text[:200])
            raise ProviderError(f"{self.name}: not a transcription: {snippet!r}")
        return str(payload["text"]).strip()

    def _status_error(self, status: int, headers: Mapping[str, str], text: str) -> ProviderError:
        try:
            payload = json.loads(text)
            detail = payload["error"]["message"] if isinstance(payload, dict) else text
        except (ValueError, KeyError, TypeError):
            detail = text
        message = f"{self.name}: HTTP {status}: {self._redact(str(detail)[:_MAX_ERROR_TEXT])}"
        if status == 429:
            return RateLimited(message, retry_after=parse_retry_after(headers))
        if status >= 500:
            return ProviderUnavailable(message, status_code=status)
        return ProviderError(message, status_code=status)

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "[REDACTED]") if self._api_key else text
