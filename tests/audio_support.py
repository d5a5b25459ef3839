"""Small real audio files for tests, made by ffmpeg (a tone; nobody listens)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

needs_ffmpeg = pytest.mark.skipif(
    shutil.which("ffmpeg") is None, reason="ffmpeg is not installed (.ci/run installs it)"
)


def opus_ogg(seconds: float = 1.0) -> bytes:
    """An OGG/Opus file, as Telegram voice messages are."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "voice.ogg"
        subprocess.run(
            [
                "ffmpeg",
                "-nostdin",
                "-loglevel",
                "error",
                "-f",
                "lavfi",
                "-i",
                f"sine=frequency=440:duration={seconds}",
                "-c:a",
                "libopus",
                str(out),
            ],
            check=True,
        )
        return out.read_bytes()
