"""Photos sent on Telegram reach the model (issue 29): the real python-telegram-bot fetches
them from the fake Bot API (getFile, then the file URL), the bot saves them in the user's
workspace and the fake LLM records the image part it was sent."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from agent_core import user_workspace
from bot.app import Loopgate
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM, delay, text
from tests.fakes.telegram_server import FakeTelegram
from tests.image_support import jpeg, size_of
from tests.telegram_support import telegram_section
from tests.waiting import wait_until


def config(tmp_path: Path, llm: FakeLLM, tg: FakeTelegram, **sections: Any) -> Any:
    return make_config(tmp_path, llm, channels={"telegram": telegram_section(tg)}, **sections)


def inbox_file(tmp_path: Path, name: str) -> Path:
    return user_workspace(tmp_path / "workspaces", "telegram:42") / "inbox" / name


def last_user_content(llm: FakeLLM) -> Any:
    return llm.last_request.json["messages"][-1]["content"]


async def test_a_photo_with_a_caption_reaches_the_model_as_an_image_part(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    photo = jpeg(64, 48)
    async with Loopgate(config(tmp_path, llm, tg)):
        update = tg.private_message(
            None, photo=tg.photo(photo, width=64, height=48), caption="what is this?"
        )
        name = f"photo_{update['message']['message_id']}.jpg"
        tg.push(update)
        await tg.wait_for(lambda: tg.texts() == ["echo: what is this?"])
        first_call = last_user_content(llm)
        # The next turn's history holds the saved path, not the picture.
        tg.push(tg.private_message("thanks"))
        await tg.wait_for(lambda: len(tg.texts()) == 2)

    text_part, image_part = first_call
    assert text_part == {"type": "text", "text": "what is this?"}
    assert image_part["type"] == "image_url"
    prefix, encoded = image_part["image_url"]["url"].split(",", 1)
    assert prefix == "data:image/jpeg;base64"
    assert size_of(base64.b64decode(encoded)) == ("JPEG", (64, 48))
    # The largest size was fetched, never the thumbnail, and saved as sent.
    assert tg.file_downloads == ["photos/file-2.jpg"]
    assert inbox_file(tmp_path, name).read_bytes() == photo
    history = llm.last_request.json["messages"]
    earlier = [m["content"] for m in history if m["role"] == "user"][-2]
    assert earlier == f"what is this?\n[image: {name}, 64×48, saved to inbox/{name}]"
    assert all("base64" not in str(m["content"]) for m in history)


async def test_a_photo_over_the_size_limit_is_skipped_and_the_caption_still_answered(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    async with Loopgate(config(tmp_path, llm, tg)):
        update = tg.private_message(
            None, photo=tg.photo(jpeg(), size=30 << 20), caption="and this?"
        )
        name = f"photo_{update['message']['message_id']}.jpg"
        tg.push(update)
        await tg.wait_for(lambda: len(tg.texts()) == 2)

    skipped = f"{name} (30.0 MB, over the 20.0 MB limit)"
    assert tg.texts() == [
        f"Skipped: {skipped}.",
        f"echo: and this?\n[attachment skipped: {skipped}]",
    ]
    assert tg.file_downloads == []  # judged from the stated size, before any download
    assert not tg.calls_of("getFile")
    assert isinstance(last_user_content(llm), str)  # no image part


async def test_a_corrupt_photo_is_saved_but_skipped_for_the_model(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    broken = jpeg(200, 200)[:300]
    async with Loopgate(config(tmp_path, llm, tg)):
        update = tg.private_message(None, photo=tg.photo(broken), caption="look")
        name = f"photo_{update['message']['message_id']}.jpg"
        tg.push(update)
        await tg.wait_for(lambda: len(tg.texts()) == 2)

    assert tg.texts()[0] == f"Skipped: {name} (not a readable image)."
    assert tg.texts()[1].startswith("echo: look\n[attachment skipped:")
    assert isinstance(last_user_content(llm), str)
    assert inbox_file(tmp_path, name).read_bytes() == broken


async def test_with_vision_off_the_model_gets_a_note_naming_the_saved_file(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    agents = {"defaults": {"workspace": str(tmp_path / "workspaces"), "vision": False}}
    async with Loopgate(config(tmp_path, llm, tg, agents=agents)):
        update = tg.private_message(None, photo=tg.photo(jpeg(1280, 960), width=1280, height=960))
        name = f"photo_{update['message']['message_id']}.jpg"
        tg.push(update)
        await tg.wait_for(lambda: len(tg.texts()) == 1)

    assert last_user_content(llm) == f"[image: {name}, 1280×960, saved to inbox/{name}]"
    assert inbox_file(tmp_path, name).is_file()


async def test_max_attachments_skips_the_extra_ones(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    async with Loopgate(config(tmp_path, llm, tg, media={"max_attachments": 0})):
        update = tg.private_message(None, photo=tg.photo(jpeg()), caption="hi")
        name = f"photo_{update['message']['message_id']}.jpg"
        tg.push(update)
        await wait_until(lambda: len(tg.texts()) == 2)

    assert tg.texts()[0] == f"Skipped: {name} (over 0 attachments)."
    assert tg.file_downloads == []


async def test_a_photo_cut_off_by_a_restart_is_downloaded_again_on_replay(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    # The stop cuts the first answer off (its grace is short), so the entry goes back to the
    # inbox holding only the file id; the next process fetches the photo anew.
    llm.script(delay(30, text("never sent")), text("seen it"))
    cfg = config(tmp_path, llm, tg, bot={"shutdown_grace": 0.2})
    async with Loopgate(cfg):
        tg.push(tg.private_message(None, photo=tg.photo(jpeg()), caption="keep this"))
        await llm.wait_for(lambda: len(llm.chat_requests) == 1)
    assert tg.texts() == []
    async with Loopgate(cfg):
        await tg.wait_for(lambda: tg.texts() == ["seen it"])

    assert tg.file_downloads == ["photos/file-2.jpg", "photos/file-2.jpg"]
    first, second = (r.json["messages"][-1]["content"] for r in llm.chat_requests)
    assert first == second  # the same caption and the same image part
    assert [p["type"] for p in second] == ["text", "image_url"]
