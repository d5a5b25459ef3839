"""The loop's side of metering (``agent_core/run_usage.py``, ``agent_core/usage.py``) with a
meter that records what it is asked and refuses on cue (a pure unit test)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_core import (
    Charge,
    LlmCall,
    Loop,
    MemoryStore,
    Reservation,
    RunRequest,
    RunStatus,
    SpanKind,
    Usage,
    UsageLimitReached,
)
from agent_core.errors import ProviderUnavailable
from agent_core.messages import Message
from agent_core.settings import CompactionSettings, MemoryFlushSettings
from agent_core.testing import ScriptedProvider, call, reply, tool_calls
from tests.agent_core.test_loop import make_loop, request

RESETS = datetime(2026, 12, 6, tzinfo=UTC)


class Meter:
    def __init__(self, *, refuse_at: int | None = None, estimate: bool = True) -> None:
        self.refuse_at = refuse_at  # the iteration whose call is refused
        self.estimate = estimate
        self.reserved: list[LlmCall] = []
        self.settled: list[tuple[LlmCall, Usage | None]] = []

    def needs_estimate(self, request: RunRequest) -> bool:
        return self.estimate

    async def reserve(self, call: LlmCall) -> Reservation:
        if call.iteration == self.refuse_at:
            raise UsageLimitReached(
                "usage.user_daily_tokens", "Limit reached. Resets soon.", RESETS
            )
        self.reserved.append(call)
        return Reservation(call)

    async def settle(self, reservation: Reservation, usage: Usage | None) -> Charge:
        self.settled.append((reservation.call, usage))
        return Charge(0.25, "test") if usage is not None else Charge()

    async def price_note(self, provider: str, model: str) -> str:
        return "$1/Mtok input (test)"


def metered(tmp_path: Path, provider: ScriptedProvider, meter: Meter) -> tuple[Loop, MemoryStore]:
    loop, store, _ = make_loop(tmp_path, provider, max_tokens=300)
    loop.meter = meter
    return loop, store


async def test_each_call_is_estimated_reserved_settled_and_charged_on_its_span(
    tmp_path: Path,
) -> None:
    meter = Meter()
    provider = ScriptedProvider(tool_calls(call("list_files")), reply("done"))
    loop, store = metered(tmp_path, provider, meter)
    result = await loop.run(request())
    assert result.status is RunStatus.COMPLETED
    first, second = meter.reserved
    assert (first.first_of_run, second.first_of_run) == (True, False)
    assert first.input_tokens > 0 and first.max_output_tokens == 300
    assert [usage for _, usage in meter.settled] == [Usage(10, 5), Usage(10, 5)]
    trace = store.traces[-1]
    spans = [s for s in trace.spans if s.kind is SpanKind.LLM]
    assert [s.attributes["cost_usd"] for s in spans] == [0.25, 0.25]
    assert spans[0].attributes["price_source"] == "test"
    assert "pricing: $1/Mtok input (test)" in provider.requests[0].messages[0].content


async def test_no_estimate_is_counted_when_no_limit_applies(tmp_path: Path) -> None:
    meter = Meter(estimate=False)
    loop, _ = metered(tmp_path, ScriptedProvider(reply("hi")), meter)
    await loop.run(request())
    assert meter.reserved[0].input_tokens == 0


async def test_refused_before_the_first_call_the_run_does_not_start(tmp_path: Path) -> None:
    meter = Meter(refuse_at=1)
    provider = ScriptedProvider()  # any model call would fail the test
    loop, store = metered(tmp_path, provider, meter)
    result = await loop.run(request())
    assert result.status is RunStatus.USAGE_LIMIT
    assert result.content == "Limit reached. Resets soon."
    assert result.error == "usage_limit: usage.user_daily_tokens"
    assert provider.requests == [] and "s1" not in store.sessions  # nothing stored
    root = store.traces[-1].root
    assert root.attributes["stop_reason"] == "usage_limit: usage.user_daily_tokens"
    assert root.attributes["usage_resets_at"] == RESETS.isoformat()


async def test_refused_between_iterations_the_run_stops_and_keeps_what_it_did(
    tmp_path: Path,
) -> None:
    meter = Meter(refuse_at=2)
    loop, store = metered(tmp_path, ScriptedProvider(tool_calls(call("list_files"))), meter)
    result = await loop.run(request())
    assert result.status is RunStatus.USAGE_LIMIT and result.iterations == 2
    roles = [m.role for m in store.sessions["s1"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert store.sessions["s1"][-1].content == "Limit reached. Resets soon."
    assert store.traces[-1].status == "usage_limit"


async def test_a_failed_call_releases_its_reservation(tmp_path: Path) -> None:
    meter = Meter()
    failing = ProviderUnavailable("down", status_code=503)
    loop, _ = metered(tmp_path, ScriptedProvider(failing, failing, failing), meter)
    result = await loop.run(request())
    assert result.status is RunStatus.FAILED
    assert [usage for _, usage in meter.settled] == [None]


# -- a session's housekeeping (agent_core/metered_provider.py) ------------------------------

BIG = "lorem ipsum dolor sit amet " * 40  # well over 100 tokens however it is counted


def stored_turns(store: MemoryStore, turns: int, text: str = "") -> None:
    store.sessions["s1"] = [
        m for i in range(turns) for m in (Message.user(f"q{i}{text}"), Message.assistant(f"a{i}"))
    ]


async def test_a_post_run_memory_flush_and_summary_are_metered_as_the_runs_calls(
    tmp_path: Path,
) -> None:
    meter = Meter()
    provider = ScriptedProvider(reply("the answer"), reply("NO_REPLY"), reply("a summary"))
    loop, store, _ = make_loop(
        tmp_path, provider, compaction=CompactionSettings(min_messages=4, keep_last=2)
    )
    loop.meter = meter
    stored_turns(store, 3)
    assert (await loop.run(request())).status is RunStatus.COMPLETED
    await loop.context.compactor.wait_idle()
    assert store.summaries["s1"] == "a summary"
    # The run, its memory flush, its summary: each reserved and settled with what it used,
    # under the run's user; the run is counted once, with its own first call.
    assert [c.first_of_run for c in meter.reserved] == [True, False, False]
    assert {(c.request.run_id, c.request.user_id) for c in meter.reserved} == {
        (meter.reserved[0].request.run_id, "u1")
    }
    assert [usage for _, usage in meter.settled] == [Usage(10, 5)] * 3


async def test_a_summary_a_limit_refuses_leaves_the_session_as_it_was(tmp_path: Path) -> None:
    meter = Meter(refuse_at=0)  # housekeeping calls only: the run's own start at iteration 1
    provider = ScriptedProvider(reply("the answer"))  # a summary call would fail the test
    compaction = CompactionSettings(
        min_messages=4, keep_last=2, memory_flush=MemoryFlushSettings(enabled=False)
    )
    loop, store, _ = make_loop(tmp_path, provider, compaction=compaction)
    loop.meter = meter
    stored_turns(store, 3)
    assert (await loop.run(request())).status is RunStatus.COMPLETED
    await loop.context.compactor.wait_idle()
    assert "s1" not in store.summaries and len(store.sessions["s1"]) == 8
    assert len(provider.requests) == 1
    [compaction_trace] = [
        t for t in store.traces if t.root.attributes.get("kind") == "post_run_compaction"
    ]
    assert compaction_trace.status == "not_compacted"
    assert compaction_trace.error == "usage.user_daily_tokens"


async def test_a_mid_loop_summary_is_metered_before_the_call_it_makes_room_for(
    tmp_path: Path,
) -> None:
    meter = Meter()
    provider = ScriptedProvider(reply("they talked about lorem ipsum"), reply("the answer"))
    loop, store, _ = make_loop(tmp_path, provider, context_window=3000)
    loop.meter = meter
    stored_turns(store, 8, " " + BIG)  # ~2,400 tokens: over the trigger (75%), under 3,000
    result = await loop.run(request())
    assert result.status is RunStatus.COMPLETED and result.content == "the answer"
    assert "they talked about lorem ipsum" in provider.requests[1].messages[1].content
    assert [(c.iteration, c.first_of_run) for c in meter.reserved] == [(0, False), (1, True)]
    assert [usage for _, usage in meter.settled] == [Usage(10, 5)] * 2


@pytest.mark.parametrize("cached", [0, 7])
def test_cached_tokens_add_up(cached: int) -> None:
    total = Usage(10, 5, cached)
    total.add(Usage(1, 1, cached))
    assert total.cached_input_tokens == 2 * cached
    assert total.as_dict()["cached_input_tokens"] == 2 * cached
