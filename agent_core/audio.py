"""Re-encoding audio for a transcription server that refuses the format it was sent.

Voice messages are uploaded as they are (OGG/Opus, M4A, MP3...): Whisper-compatible servers take
them, and re-encoding costs CPU and quality. Only when a server refuses the format is the audio
converted, with the ``ffmpeg`` program when it is installed, to 16 kHz mono WAV: the format every
speech model reads, at 32 KB a second (ten minutes fit the 25 MB upload limit of the big APIs).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from contextlib import suppress
from pathlib import Path

from agent_core.errors import AgentError

FFMPEG = "ffmpeg"
TRANSCODE_SECONDS = 120.0
"""Longest a conversion may take; a stuck ffmpeg is killed."""
WAV_MIME = "audio/wav"


class AudioUnreadable(AgentError):
    """The audio could not be converted (ffmpeg missing, or the file is not audio it reads)."""


def can_transcode() -> bool:
    return shutil.which(FFMPEG) is not None


async def to_wav(raw: bytes, *, limit_seconds: float = TRANSCODE_SECONDS) -> bytes:
    """``raw`` (any format ffmpeg reads) as 16 kHz mono 16-bit WAV. Raises
    :class:`AudioUnreadable`."""
    program = shutil.which(FFMPEG)
    if program is None:
        raise AudioUnreadable("ffmpeg is not installed")
    # Files, not pipes: MP4/M4A keep their index at the end, which a pipe can't seek to.
    with tempfile.TemporaryDirectory(prefix="loopgate-audio-") as tmp:
        source, target = Path(tmp) / "in", Path(tmp) / "out.wav"
        await asyncio.to_thread(source.write_bytes, raw)
        process = await asyncio.create_subprocess_exec(
            program,
            "-nostdin",
            "-hide_banner",
            "-loglevel",
            "error",
            "-i",
            str(source),
            "-vn",
            "-ac",
            "1",
            "-ar",
            "16000",
            "-f",
            "wav",
            str(target),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            _, errors = await asyncio.wait_for(process.communicate(), limit_seconds)
        except BaseException:  # a timeout, or the run was cancelled: no ffmpeg left behind
            with suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise
        if process.returncode != 0 or not target.is_file():
            detail = errors.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
            raise AudioUnreadable(f"ffmpeg could not convert the audio: {detail[0][:200]}")
        return await asyncio.to_thread(target.read_bytes)
