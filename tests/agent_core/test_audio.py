"""agent_core/audio.py: converting audio to WAV with the real ffmpeg."""

from __future__ import annotations

import io
import wave

import pytest

from agent_core.audio import AudioUnreadable, can_transcode, to_wav
from tests.audio_support import needs_ffmpeg, opus_ogg


@needs_ffmpeg
async def test_opus_becomes_16k_mono_wav() -> None:
    assert can_transcode()
    wav = await to_wav(opus_ogg(1.0))
    with wave.open(io.BytesIO(wav)) as audio:
        assert (audio.getnchannels(), audio.getframerate(), audio.getsampwidth()) == (1, 16000, 2)
        assert 0.9 < audio.getnframes() / 16000 < 1.1


@needs_ffmpeg
async def test_what_is_not_audio_is_unreadable() -> None:
    with pytest.raises(AudioUnreadable, match="could not convert"):
        await to_wav(b"this is not audio at all")


async def test_without_ffmpeg_nothing_is_converted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert not can_transcode()
    with pytest.raises(AudioUnreadable, match="not installed"):
        await to_wav(b"OggS")
