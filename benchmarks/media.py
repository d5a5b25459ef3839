"""The added latency of a photo turn (issue 29): a 1 MB JPEG against a text message.

``loopgate serve`` in its own process, Telegram polling against the fake Bot API and an
OpenAI-compatible fake LLM that answers at once (both from tests/fakes, over real HTTP on
127.0.0.1, in this process), SQLite, pacing and the sender limit off: the serve benchmark's
set-up (``serve.py``). Text turns and photo turns alternate in one chat, so both see the same
history length and the same machine noise. A photo turn is a photo message whose caption is the
text: the bot fetches it with ``getFile`` and the file URL, saves it in the user's workspace,
re-encodes it for the model (``agent_core.images``) and sends it as a base64 image part; the
fake model echoes the caption.

Measured per turn: from ``getUpdates`` handing the update out to the reply's ``sendMessage``
reaching the fake (p50/p90/p99), and the server's CPU (user + system, from /proc).

    python benchmarks/media.py [--turns 40] [--warmup 4] [--photo-kb 1024] [--out result.json]

Prints a table and one JSON line (``--out`` also writes it): each kind's percentiles, the
photo turn's added milliseconds at p50 and p99, and the ratios photo / text.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PIL import Image  # noqa: E402
from serve_common import BenchTelegram, cpu_seconds, emit, pct, start_serve, stop_serve  # noqa: E402

from tests.fakes.llm_server import FakeLLM  # noqa: E402

USER = 42
WIDTH, HEIGHT = 1600, 1200  # a phone photo's shape; the bot keeps it (under 2048 px)


def jpeg_of_size(target: int) -> bytes:
    """A WIDTH×HEIGHT JPEG of about ``target`` bytes (within 2 %): noise, which JPEG can't
    shrink, over the top rows of a flat background, as many rows as it takes."""
    noise = Image.frombytes("RGB", (WIDTH, HEIGHT), os.urandom(WIDTH * HEIGHT * 3))
    low, high, data = 1, HEIGHT, b""
    while low <= high:
        rows = (low + high) // 2
        image = Image.new("RGB", (WIDTH, HEIGHT), (90, 140, 200))
        image.paste(noise.crop((0, 0, WIDTH, rows)), (0, 0))
        out = io.BytesIO()
        image.save(out, format="JPEG", quality=85)
        data = out.getvalue()
        if abs(len(data) - target) <= target // 50:
            break
        low, high = (rows + 1, high) if len(data) < target else (low, rows - 1)
    return data


def write_config(workdir: Path, llm: FakeLLM, tg: BenchTelegram) -> Path:
    config = {
        "providers": {"openai": {"base_url": llm.base_url, "model": "fake-model"}},
        "channels": {
            "telegram": {
                "enabled": True,
                "token": tg.token,
                "api_base_url": tg.base_url,
                "rate_limit": "off",
            }
        },
        "bot": {"sender_rate_limit": "off"},
    }
    path = workdir / "config.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


async def photo_turn(tg: BenchTelegram, caption: str, photo: bytes) -> float:
    """A photo DM with ``caption``; the ms from hand-out to the reply."""
    future = tg.expect_reply(USER, caption)
    update = tg.private_message(
        None, user_id=USER, photo=tg.photo(photo, width=WIDTH, height=HEIGHT), caption=caption
    )
    update_id = tg.push(update)
    async with asyncio.timeout(300):
        replied = await future
    del tg.waiting[USER]
    return (replied - tg.handed_out[update_id]) * 1000


async def run(args: argparse.Namespace, workdir: Path, photo: bytes) -> dict[str, Any]:
    text_ms: list[float] = []
    photo_ms: list[float] = []
    cpu = {"text": 0.0, "photo": 0.0}
    async with FakeLLM() as llm, BenchTelegram() as tg:
        proc, log, _ = await start_serve(workdir, write_config(workdir, llm, tg))
        try:
            for n in range(args.warmup):
                await tg.ask(USER, f"warm text {n}")
                await photo_turn(tg, f"warm photo {n}", photo)
            for n in range(args.turns):
                before = cpu_seconds(proc.pid)
                text_ms.append(await tg.ask(USER, f"text {n}"))
                middle = cpu_seconds(proc.pid)
                photo_ms.append(await photo_turn(tg, f"photo {n}", photo))
                cpu["text"] += middle - before
                cpu["photo"] += cpu_seconds(proc.pid) - middle
            downloads = len(tg.file_downloads)
        finally:
            await stop_serve(proc, log)
    if downloads != args.warmup + args.turns:
        raise SystemExit(f"expected {args.warmup + args.turns} photo downloads, saw {downloads}")

    def summary(values: list[float]) -> dict[str, float]:
        return {q: round(pct(values, p), 2) for q, p in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))}

    text, image = summary(text_ms), summary(photo_ms)
    return {
        "photo_bytes": len(photo),
        "turns": args.turns,
        "text_ms": text,
        "photo_ms": image,
        "added_ms": {q: round(image[q] - text[q], 2) for q in ("p50", "p99")},
        "ratio": {q: round(image[q] / text[q], 2) for q in ("p50", "p99")},
        "cpu_ms_per_turn": {
            kind: round(seconds * 1000 / args.turns, 2) for kind, seconds in cpu.items()
        },
    }


def print_table(data: dict[str, Any]) -> None:
    text, photo = data["text_ms"], data["photo_ms"]
    rows = [
        (f"text turn p50 / p90 / p99 ({data['turns']})",
         f"{text['p50']} / {text['p90']} / {text['p99']} ms"),
        (f"photo turn ({data['photo_bytes'] / 1e6:.2f} MB JPEG) p50 / p90 / p99",
         f"{photo['p50']} / {photo['p90']} / {photo['p99']} ms"),
        ("added by the photo, p50 / p99",
         f"{data['added_ms']['p50']} / {data['added_ms']['p99']} ms"),
        ("ratio photo / text, p50 / p99", f"{data['ratio']['p50']} / {data['ratio']['p99']}"),
        ("server CPU per turn, text / photo",
         f"{data['cpu_ms_per_turn']['text']} / {data['cpu_ms_per_turn']['photo']} ms"),
    ]  # fmt: skip
    width = max(len(name) for name, _ in rows) + 2
    for name, value in rows:
        print(f"{name:<{width}}{value}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=40, help="turns of each kind (default 40)")
    parser.add_argument("--warmup", type=int, default=4, help="turns of each kind first")
    parser.add_argument("--photo-kb", type=int, default=1024, help="the JPEG's size (1024)")
    parser.add_argument("--out", type=Path, help="also write the JSON result here")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (log, database)")
    args = parser.parse_args()
    photo = jpeg_of_size(args.photo_kb * 1024)
    workdir = Path(tempfile.mkdtemp(prefix="loopgate-media-"))
    started = time.monotonic()
    try:
        data = asyncio.run(run(args, workdir, photo))
    finally:
        if not args.keep:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"work dir: {workdir}", file=sys.stderr)
    print_table(data)
    print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
    emit(data, args.out)


if __name__ == "__main__":
    main()
