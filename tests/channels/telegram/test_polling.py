"""The long poller against the fake Bot API (python-telegram-bot's real ``Bot``): updates handed
over in order, the offset confirmed and stored only past what the bot took, failures outlived."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from structlog.testing import capture_logs
from telegram import Bot, Update

from channels.errors import NotAccepted
from channels.telegram._aiohttp_request import AiohttpRequest
from channels.telegram._options import TelegramOptions
from channels.telegram._polling import OFFSET_KEY, Poller
from tests.fakes.telegram_server import FakeTelegram
from tests.inbound_support import MemoryState
from tests.waiting import wait_until


class Taker:
    """The bot's side: records the update ids it took; refuses those listed in ``refuse`` once."""

    def __init__(self, refuse: set[int] | None = None) -> None:
        self.taken: list[int] = []
        self.refused: list[int] = []
        self.refuse = set(refuse or ())

    async def __call__(self, update: Update) -> None:
        if update.update_id in self.refuse:
            self.refuse.discard(update.update_id)
            self.refused.append(update.update_id)
            raise NotAccepted("the bot is draining")
        self.taken.append(update.update_id)


def options(tg: FakeTelegram, poll_timeout: int = 1) -> TelegramOptions:
    return TelegramOptions(
        token=tg.token, api_base_url=tg.base_url, polling_timeout=poll_timeout, retry_backoff=0.05
    )


@asynccontextmanager
async def polling(
    tg: FakeTelegram,
    process: Callable[[Update], Awaitable[None]],
    state: Any = None,
    gate: Any = None,
    poll_timeout: int = 1,
) -> AsyncIterator[Poller]:
    bot = Bot(
        tg.token,
        base_url=f"{tg.base_url}/bot",
        request=AiohttpRequest(),
        get_updates_request=AiohttpRequest(read_timeout=10.0),
    )
    await bot.initialize()
    poller = Poller(bot, options(tg, poll_timeout), state or MemoryState(), process, gate=gate)
    poller.start()
    try:
        yield poller
    finally:
        await poller.stop()
        await bot.shutdown()


def offsets(tg: FakeTelegram) -> list[int | None]:
    return [c.params.get("offset") for c in tg.calls_of("getUpdates")]


async def test_updates_are_handed_over_in_order_and_the_offset_stored(tg: FakeTelegram) -> None:
    taker, state = Taker(), MemoryState()
    ids = [tg.push(tg.private_message(text)) for text in ("one", "two", "three")]
    async with polling(tg, taker, state):
        await wait_until(lambda: len(taker.taken) == 3)
        await tg.wait_for(lambda: ids[-1] + 1 in offsets(tg))
    assert taker.taken == ids
    assert state.values[("telegram", OFFSET_KEY)] == str(ids[-1] + 1)
    assert tg.updates == []  # the later getUpdates confirmed them
    assert tg.calls_of("getUpdates")[0].params.get("allowed_updates") == ["message"]


async def test_polling_resumes_at_the_stored_offset(tg: FakeTelegram) -> None:
    old = tg.push(tg.private_message("handled before the restart"))
    new = tg.push(tg.private_message("new"))
    state = MemoryState()
    state.values[("telegram", OFFSET_KEY)] = str(old + 1)
    taker = Taker()
    async with polling(tg, taker, state):
        await wait_until(lambda: taker.taken)
    assert taker.taken == [new]
    assert offsets(tg)[0] == old + 1


async def test_an_unreadable_offset_starts_where_telegram_is(tg: FakeTelegram) -> None:
    class Unreadable(MemoryState):
        async def get(self, channel: str, key: str) -> str | None:
            raise OSError("database down")

    first = tg.push(tg.private_message("waiting"))
    taker = Taker()
    with capture_logs() as logs:
        async with polling(tg, taker, Unreadable()):
            await wait_until(lambda: taker.taken)
    assert taker.taken == [first]
    assert offsets(tg)[0] is None
    assert [e["event"] for e in logs if e["log_level"] == "warning"][:1] == [
        "telegram.offset_unreadable"
    ]


async def test_a_refused_update_is_fetched_again_with_those_after_it(tg: FakeTelegram) -> None:
    ids = [tg.push(tg.private_message(text)) for text in ("one", "two", "three")]
    taker, state = Taker(refuse={ids[1]}), MemoryState()
    with capture_logs() as logs:
        async with polling(tg, taker, state):
            await wait_until(lambda: len(taker.taken) == 3)
    assert taker.refused == [ids[1]]
    assert taker.taken == ids  # in order, none twice
    # After the refusal the offset stood just past the one update taken.
    assert offsets(tg)[:2] == [None, ids[1]]
    assert any(e["event"] == "telegram.not_accepted" for e in logs)
    assert state.values[("telegram", OFFSET_KEY)] == str(ids[-1] + 1)


async def test_failed_polls_are_retried(tg: FakeTelegram) -> None:
    tg.fail_next("getUpdates", 500, count=2)
    update = tg.push(tg.private_message("after the outage"))
    taker = Taker()
    with capture_logs() as logs:
        async with polling(tg, taker):
            await wait_until(lambda: taker.taken)
    assert taker.taken == [update]
    failures = [e for e in logs if e["event"] == "telegram.poll_failed"]
    assert [e["retry_in"] for e in failures] == [0.05, 0.1]  # backing off


async def test_a_429_is_waited_out(tg: FakeTelegram) -> None:
    tg.fail_next("getUpdates", 429, retry_after=1)
    update = tg.push(tg.private_message("later"))
    taker = Taker()
    async with polling(tg, taker):
        await wait_until(lambda: taker.taken)
    first, second = tg.calls_of("getUpdates")[:2]
    assert second.at - first.at >= 0.9  # Telegram's retry_after, not our own backoff
    assert taker.taken == [update]


async def test_an_offset_that_cannot_be_stored_does_not_stop_polling(tg: FakeTelegram) -> None:
    class ReadOnly(MemoryState):
        async def set(self, channel: str, key: str, value: str) -> None:
            raise OSError("read-only")

    taker = Taker()
    first = tg.push(tg.private_message("one"))
    with capture_logs() as logs:
        async with polling(tg, taker, ReadOnly()):
            await wait_until(lambda: taker.taken == [first])
            second = tg.push(tg.private_message("two"))
            await wait_until(lambda: taker.taken == [first, second])
    assert any(e["event"] == "telegram.offset_not_saved" for e in logs)
    assert first + 1 in offsets(tg)  # confirmed all the same, from memory


class Gate:
    """A PollGate the test hands over and takes back."""

    def __init__(self, held: bool) -> None:
        self.held = held
        self.waiting = False
        self._turn = asyncio.Event()
        if held:
            self._turn.set()

    def holds(self) -> bool:
        return self.held

    async def wait_turn(self) -> None:
        self.waiting = True
        await self._turn.wait()
        self.waiting = False

    def grant(self) -> None:
        self.held = True
        self._turn.set()

    def revoke(self) -> None:
        self.held = False
        self._turn = asyncio.Event()


async def test_without_the_lease_nothing_is_polled_then_the_stored_offset_is_used(
    tg: FakeTelegram,
) -> None:
    gate, state, taker = Gate(held=False), MemoryState(), Taker()
    old = tg.push(tg.private_message("taken by the previous poller"))
    new = tg.push(tg.private_message("ours"))
    async with polling(tg, taker, state, gate):
        # The other process polls and stores its offset while this one waits for its turn.
        await wait_until(lambda: gate.waiting)
        state.values[("telegram", OFFSET_KEY)] = str(old + 1)
        assert tg.calls_of("getUpdates") == []
        gate.grant()
        await wait_until(lambda: taker.taken)
    assert taker.taken == [new]
    assert offsets(tg)[0] == old + 1


async def test_a_batch_fetched_after_the_lease_was_lost_is_not_handed_over(
    tg: FakeTelegram,
) -> None:
    gate, taker = Gate(held=True), Taker()
    async with polling(tg, taker, gate=gate):
        await tg.wait_for(lambda: tg.calls_of("getUpdates"))  # in its long poll
        with capture_logs() as logs:
            gate.revoke()
            lost = tg.push(tg.private_message("for the next poller"))
            await wait_until(lambda: any(e["event"] == "telegram.poller_lease_lost" for e in logs))
        assert taker.taken == []
    assert [u["update_id"] for u in tg.updates] == [lost]  # unconfirmed, for the other process


async def test_stop_ends_a_long_poll_at_once(tg: FakeTelegram) -> None:
    taker = Taker()
    async with polling(tg, taker, poll_timeout=10) as poller:
        await tg.wait_for(lambda: tg.calls_of("getUpdates"))
        loop = asyncio.get_running_loop()
        started = loop.time()
        await poller.stop()
        assert loop.time() - started < 3  # not the long poll's 10 s
        calls = len(tg.calls_of("getUpdates"))
        late = tg.push(tg.private_message("after the stop"))
        await poller.stop()  # idempotent
    assert len(tg.calls_of("getUpdates")) == calls
    assert taker.taken == [] and [u["update_id"] for u in tg.updates] == [late]
