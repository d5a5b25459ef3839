"""A Telegram album (several messages sharing ``media_group_id``) is one turn (issue 29): its
pictures and its caption reach the model in one run, each part stored in the inbox when it
came, and a restart in the middle answers the album once, fetching its files again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select

from bot.app import Loopgate
from bot.storage.models import InboxRow
from tests.conftest import make_config
from tests.fakes.llm_server import FakeLLM, delay, text
from tests.fakes.telegram_server import FakeTelegram
from tests.image_support import jpeg
from tests.telegram_support import telegram_section
from tests.waiting import wait_until


def config(tmp_path: Path, llm: FakeLLM, tg: FakeTelegram, **sections: Any) -> Any:
    return make_config(tmp_path, llm, channels={"telegram": telegram_section(tg)}, **sections)


def album(tg: FakeTelegram, caption: str, *colors: str, group: str = "album-1") -> list[Any]:
    """The updates of one album: the first part carries the caption, as Telegram sends it."""
    updates = []
    for i, color in enumerate(colors):
        extra: dict[str, Any] = {"caption": caption} if i == 0 else {}
        updates.append(
            tg.private_message(
                None, photo=tg.photo(jpeg(32, 24, color)), media_group_id=group, **extra
            )
        )
    return updates


async def inbox_states(app: Loopgate) -> list[str]:
    rows = await app.db.run_read(
        lambda conn: conn.execute(select(InboxRow.state).order_by(InboxRow.id)).all()
    )
    return [str(row.state) for row in rows]


async def settled(app: Loopgate, count: int) -> list[str]:
    """The inbox's states once ``count`` entries have ended (the answer goes out first)."""

    async def ended() -> list[str] | None:
        states = await inbox_states(app)
        return states if states.count("answered") == count else None

    return await wait_until(ended, what=lambda: f"{count} answered entries")


async def test_an_album_is_one_turn_with_every_picture_and_the_caption(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    async with Loopgate(config(tmp_path, llm, tg)) as app:
        for update in album(tg, "which is best?", "red", "green", "blue"):
            tg.push(update)
        await tg.wait_for(lambda: len(tg.texts()) == 1)
        # Each part was stored as it came; the one turn answered them all.
        states = await settled(app, 3)

    assert tg.texts() == ["echo: which is best?"]
    (request,) = llm.chat_requests
    parts = request.json["messages"][-1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "image_url", "image_url"]
    assert parts[0]["text"] == "which is best?"
    assert len(tg.file_downloads) == 3
    assert states == ["answered", "answered", "answered"]


async def test_two_albums_are_two_turns(tmp_path: Path, llm: FakeLLM, tg: FakeTelegram) -> None:
    async with Loopgate(config(tmp_path, llm, tg)):
        for update in album(tg, "first", "red", "green", group="a"):
            tg.push(update)
        await tg.wait_for(lambda: len(tg.texts()) == 1)
        for update in album(tg, "second", "blue", "white", group="b"):
            tg.push(update)
        await tg.wait_for(lambda: len(tg.texts()) == 2)

    assert tg.texts() == ["echo: first", "echo: second"]
    counts = [len(r.json["messages"][-1]["content"]) for r in llm.chat_requests]
    assert counts == [3, 3]


async def test_an_album_cut_off_by_a_restart_is_answered_once_and_fetched_again(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    llm.script(delay(30, text("never sent")), text("nice pictures"))
    cfg = config(tmp_path, llm, tg, bot={"shutdown_grace": 0.2})
    async with Loopgate(cfg):
        for update in album(tg, "keep these", "red", "green"):
            tg.push(update)
        await llm.wait_for(lambda: len(llm.chat_requests) == 1)
    assert tg.texts() == []
    async with Loopgate(cfg) as app:
        await tg.wait_for(lambda: tg.texts() == ["nice pictures"])
        states = await settled(app, 2)

    assert len(tg.file_downloads) == 4  # both pictures, twice
    first, second = (r.json["messages"][-1]["content"] for r in llm.chat_requests)
    assert first == second
    assert [p["type"] for p in second] == ["text", "image_url", "image_url"]
    assert len(llm.chat_requests) == 2  # the restarted album ran once, not once a part
    assert tg.texts() == ["nice pictures"]
    assert states == ["answered", "answered"]


async def test_in_a_group_the_caption_that_mentions_the_bot_brings_the_whole_album(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    caption = f"@{tg.bot_username} compare these"
    async with Loopgate(config(tmp_path, llm, tg)):
        for i, color in enumerate(["red", "green", "blue"]):
            extra: dict[str, Any] = (
                {"caption": caption, "caption_entities": tg.mention(caption)} if i == 0 else {}
            )
            tg.push(
                tg.group_message(
                    None, photo=tg.photo(jpeg(32, 24, color)), media_group_id="g-album", **extra
                )
            )
        await tg.wait_for(lambda: len(tg.texts()) == 1)
        # An album nobody addressed stays unanswered, as any group message would.
        for update in [
            tg.group_message(None, photo=tg.photo(jpeg()), media_group_id="other", caption="x"),
            tg.group_message(None, photo=tg.photo(jpeg()), media_group_id="other"),
        ]:
            tg.push(update)
        await tg.wait_for(lambda: len(tg.calls_of("getUpdates")) >= 4)

    (request,) = llm.chat_requests
    parts = request.json["messages"][-1]["content"]
    assert parts[0]["text"].endswith("compare these")
    assert [p["type"] for p in parts[1:]] == ["image_url"] * 3
