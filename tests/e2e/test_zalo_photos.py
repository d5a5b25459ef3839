"""Photos sent on Zalo reach the model (issue 29): an image event carries the photo's URL
(``photo`` / ``photo_url``); the bot downloads it from there (the fake Zalo serves it, as Zalo's
CDN would), without the bot token, cut off at ``media.max_bytes`` since Zalo states no size."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from agent_core import user_workspace
from bot.app import Loopgate
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM
from tests.fakes.zalo_server import DEFAULT_TOKEN, FakeZalo, image_event
from tests.image_support import jpeg, size_of


def config(tmp_path: Path, llm: FakeLLM, zalo: FakeZalo, **sections: Any) -> Any:
    section = {
        "enabled": True,
        "token": DEFAULT_TOKEN,
        "api_base_url": zalo.base_url,
        "mode": "polling",
        "polling_timeout": 1,
    }
    return make_config(tmp_path, llm, channels={"zalo": section}, **sections)


def last_user_content(llm: FakeLLM) -> Any:
    return llm.last_request.json["messages"][-1]["content"]


async def test_a_photo_and_its_caption_reach_the_model(
    tmp_path: Path, llm: FakeLLM, zalo: FakeZalo
) -> None:
    photo = jpeg(48, 36)
    async with Loopgate(config(tmp_path, llm, zalo)):
        event = image_event(zalo.add_photo(photo, "a.jpg"), caption="what is it?", chat_id="u1")
        zalo.push(event)
        await zalo.wait_for(lambda: zalo.texts() == ["echo: what is it?"])

    text_part, image_part = last_user_content(llm)
    assert text_part == {"type": "text", "text": "what is it?"}
    encoded = image_part["image_url"]["url"].split(",", 1)[1]
    assert size_of(base64.b64decode(encoded)) == ("JPEG", (48, 36))
    ((name, headers),) = zalo.photo_downloads
    assert name == "a.jpg"
    assert all(DEFAULT_TOKEN not in value for value in headers.values())
    saved = user_workspace(tmp_path / "workspaces", "zalo:u1") / "inbox"
    assert [p.read_bytes() for p in saved.iterdir()] == [photo]


async def test_a_photo_over_the_limit_is_cut_off_and_named(
    tmp_path: Path, llm: FakeLLM, zalo: FakeZalo
) -> None:
    big = jpeg(400, 400, "blue") + b"\0" * 4096
    async with Loopgate(config(tmp_path, llm, zalo, media={"max_bytes": 2048})):
        event = image_event(zalo.add_photo(big), caption="look", chat_id="u1")
        zalo.push(event)
        await zalo.wait_for(lambda: len(zalo.texts()) == 2)

    skipped, answer = zalo.texts()
    assert skipped.startswith("Skipped: photo_") and "over the 2 KB limit" in skipped
    assert answer.startswith("echo: look\n[attachment skipped: photo_")
    assert isinstance(last_user_content(llm), str)  # no image part


async def test_a_photo_that_is_gone_is_named_and_the_caption_answered(
    tmp_path: Path, llm: FakeLLM, zalo: FakeZalo
) -> None:
    async with Loopgate(config(tmp_path, llm, zalo)):
        missing = f"{zalo.base_url}/photos/expired.jpg"
        zalo.push(image_event(missing, caption="hello", chat_id="u1"))
        await zalo.wait_for(lambda: len(zalo.texts()) == 2)

    assert zalo.texts()[0].endswith("(could not be downloaded).")
    assert zalo.texts()[1].startswith("echo: hello\n")
