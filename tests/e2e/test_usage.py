"""Usage end to end (issue 32): the fake LLM reports usage over real HTTP, every call is priced
and added up, and limits refuse calls with one notice while the message stays in the inbox."""

from __future__ import annotations

import asyncio
import io
import json
from argparse import Namespace
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_core import RunStatus, SpanKind, Trace
from bot.app import Loopgate
from bot.cli import usage as usage_cli
from bot.storage import SqlTraceStore
from bot.storage.inbox import InboxState, SqlInbox
from channels import ChatRef, ChatType
from tests.conftest import ChatDriver, make_config
from tests.fakes.llm_server import FakeLLM, call, delay, text, tool_calls

PRICED = {"input_per_mtok": 2.0, "output_per_mtok": 8.0, "cached_input_per_mtok": 0.5}


def provider(llm: FakeLLM, model: str = "fake-model", **extra: Any) -> dict[str, Any]:
    return {"openai": {"base_url": llm.base_url, "model": model, **extra}}


@pytest.fixture
async def priced(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Loopgate]:
    config = make_config(tmp_path, llm, providers=provider(llm, pricing=PRICED))
    async with Loopgate(config) as app:
        yield app


async def traces_of(app: Loopgate) -> list[Trace]:
    return await SqlTraceStore(app.db).recent_traces(limit=50)


def llm_spans(trace: Trace) -> list[dict[str, Any]]:
    return [span.attributes for span in trace.spans if span.kind is SpanKind.LLM]


async def cli_report(app: Loopgate, *args: str) -> dict[str, Any]:
    """``loopgate usage --json`` as another process runs it: it reads what the server wrote
    (the server writes usage behind its runs, within a second; flushed here at once)."""
    await app.meter.store.flush()
    out = io.StringIO()
    namespace = Namespace(since="1d", by="model", json=True)
    for arg in args:
        key, value = arg.split("=")
        setattr(namespace, key, value)
    assert await usage_cli.run(app.config, namespace, out) == 0
    return dict(json.loads(out.getvalue()))


class TestAccounting:
    async def test_every_call_is_priced_on_its_span_and_added_up(
        self, priced: Loopgate, llm: FakeLLM
    ) -> None:
        dm = ChatDriver(priced, ChatRef("web", "dm-alice", ChatType.DIRECT))
        llm.script(
            tool_calls(call("list_files", {}), usage=(1000, 50), cached_tokens=400),
            text("done", usage=(1200, 30)),
        )
        result = await dm.ask("look around")
        assert result is not None and result.status is RunStatus.COMPLETED
        # streamed: the usage came on the final chunk because include_usage was asked for
        assert llm.chat_requests[0].json["stream_options"] == {"include_usage": True}
        [trace] = await traces_of(priced)
        first, second = llm_spans(trace)
        assert (first["input_tokens"], first["output_tokens"]) == (1000, 50)
        assert first["cached_input_tokens"] == 400
        # 600 fresh input at $2, 400 cached at $0.5, 50 output at $8 per million tokens
        assert first["cost_usd"] == pytest.approx((600 * 2 + 400 * 0.5 + 50 * 8) / 1e6)
        assert second["cost_usd"] == pytest.approx((1200 * 2 + 30 * 8) / 1e6)
        assert first["price_source"] == "config"

        report = await cli_report(priced)
        assert report["input_tokens"] == 2200 and report["output_tokens"] == 80
        assert report["cached_input_tokens"] == 400 and report["runs"] == 1
        assert report["cost_usd"] == pytest.approx(first["cost_usd"] + second["cost_usd"])
        [row] = report["rows"]
        assert row["model"] == "fake-model" and row["input_tokens"] == 2200

    async def test_the_breakdowns_add_up_to_the_totals(
        self, priced: Loopgate, llm: FakeLLM
    ) -> None:
        alice = ChatDriver(priced, ChatRef("web", "dm-alice", ChatType.DIRECT))
        bob = ChatDriver(priced, ChatRef("web", "dm-bob", ChatType.DIRECT))
        llm.script(text("a", usage=(100, 10)), text("b", usage=(300, 20)))
        await alice.ask("one")
        await bob.ask("two", sender="bob")
        totals = await cli_report(priced)
        by_user = await cli_report(priced, "by=user")
        assert {row["user"]: row["input_tokens"] for row in by_user["rows"]} == {
            "web:bob": 300,
            "web:alice": 100,
        }
        for by in ("agent", "channel", "user", "model"):
            report = await cli_report(priced, f"by={by}")
            assert sum(r["input_tokens"] for r in report["rows"]) == totals["input_tokens"]
            assert sum(r["runs"] for r in report["rows"]) == totals["runs"] == 2

    async def test_prices_from_the_table_name_its_version(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        import genai_prices

        config = make_config(tmp_path, llm, providers=provider(llm, model="gpt-4o-mini"))
        async with Loopgate(config) as app:
            dm = ChatDriver(app, ChatRef("web", "dm-alice", ChatType.DIRECT))
            llm.script(text("hi", usage=(1_000_000, 1_000_000)))
            await dm.ask("hello")
            [trace] = await traces_of(app)
            [span] = llm_spans(trace)
        assert span["price_source"] == f"genai-prices {genai_prices.__version__}"
        table = genai_prices.calc_price(
            genai_prices.Usage(input_tokens=1_000_000, output_tokens=1_000_000),
            "gpt-4o-mini",
            provider_id="openai",
        )
        assert span["cost_usd"] == pytest.approx(float(table.total_price))

    async def test_an_unknown_model_costs_null_not_zero(
        self, app: Loopgate, dm: ChatDriver, llm: FakeLLM
    ) -> None:
        llm.script(text("hi", usage=(500, 5)))
        await dm.ask("hello")
        [trace] = await traces_of(app)
        [span] = llm_spans(trace)
        assert span["cost_usd"] is None and span["price_source"] is None
        report = await cli_report(app)
        assert report["input_tokens"] == 500
        assert report["cost_usd"] is None and report["unpriced_calls"] == 1
        assert report["rows"][0]["cost_usd"] is None

    async def test_the_runtime_section_gives_the_model_its_price(
        self, priced: Loopgate, llm: FakeLLM
    ) -> None:
        dm = ChatDriver(priced, ChatRef("web", "dm-alice", ChatType.DIRECT))
        await dm.ask("hello")
        system = llm.chat_requests[0].json["messages"][0]["content"]
        assert "pricing: $2/Mtok input, $8/Mtok output, $0.5/Mtok cached input (config)" in system

    async def test_usage_in_chat_shows_the_askers_own_day_and_month(
        self, priced: Loopgate, llm: FakeLLM
    ) -> None:
        alice = ChatDriver(priced, ChatRef("web", "room", ChatType.GROUP))
        llm.script(text("a", usage=(1000, 100)), text("b", usage=(5000, 500)))
        await alice.ask("one")
        await alice.ask("two", sender="bob")
        await alice.send("/usage")
        await alice.wait_for(lambda: len(alice.texts()) == 3)
        month = datetime.now(UTC).strftime("%B %Y")
        cost = (1000 * 2 + 100 * 8) / 1e6
        assert alice.texts()[-1] == (
            "Your usage here (UTC):\n"
            f"today: 1,000 input + 100 output tokens, ${cost:.4f}, 1 run\n"
            f"this month ({month}): 1,000 input + 100 output tokens, ${cost:.4f}, 1 run"
        )
        await alice.send("/usage", sender="carol")
        await alice.wait_for(lambda: len(alice.texts()) == 4)
        assert "today: 0 input + 0 output tokens, $0, 0 runs" in alice.texts()[-1]


async def entries(app: Loopgate) -> list[Any]:
    """The entries not answered, oldest first."""
    return sorted(await SqlInbox(app.db).unanswered(), key=lambda e: e.id)


class TestLimits:
    async def test_a_user_quota_reached_mid_conversation_refuses_the_next_message(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        config = make_config(tmp_path, llm, usage={"user_daily_tokens": 1000})
        async with Loopgate(config) as app:
            dm = ChatDriver(app, ChatRef("web", "dm-alice", ChatType.DIRECT))
            llm.script(text("first answer", usage=(900, 150)))
            first = await dm.ask("hello")
            assert first is not None and first.status is RunStatus.COMPLETED
            second = await dm.ask("and now?")
            assert second is not None and second.status is RunStatus.USAGE_LIMIT
            assert len(llm.chat_requests) == 1, "the refused run never reached the model"
            notice = dm.texts()[-1]
            tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
            assert "daily usage limit" in notice and f"00:00 UTC on {tomorrow}" in notice
            assert len(dm.texts()) == 2, "one answer, then one notice"
            last = (await entries(app))[-1]
            assert last.state is InboxState.DROPPED
            assert last.reason.startswith("usage limit: usage_limit: usage.user_daily_tokens")
            assert last.message.text == "and now?"
            [refused, _] = await traces_of(app)
            assert refused.root.attributes["stop_reason"] == "usage_limit: usage.user_daily_tokens"
            assert llm_spans(refused) == []
            # bob has a quota of his own
            llm.script(text("hi bob", usage=(10, 2)))
            bob = await dm.ask("hi", sender="bob")
            assert bob is not None and bob.status is RunStatus.COMPLETED

    async def test_a_limit_reached_between_iterations_stops_the_run(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        config = make_config(tmp_path, llm, usage={"user_daily_tokens": 1000})
        async with Loopgate(config) as app:
            dm = ChatDriver(app, ChatRef("web", "dm-alice", ChatType.DIRECT))
            llm.script(tool_calls(call("list_files", {}), usage=(1500, 20)))
            result = await dm.ask("look around")
            assert result is not None and result.status is RunStatus.USAGE_LIMIT
            assert len(llm.chat_requests) == 1, "the second iteration was refused"
            assert "daily usage limit" in dm.texts()[-1]
            [trace] = await traces_of(app)
            assert trace.status == "usage_limit" and trace.error is not None
            assert trace.root.attributes["stop_reason"] == "usage_limit: usage.user_daily_tokens"
            assert [s.name for s in trace.spans if s.kind is SpanKind.TOOL] == ["list_files"]
            [entry] = await entries(app)
            assert entry.state is InboxState.DROPPED and "usage.user_daily_tokens" in entry.reason

    async def test_admins_are_exempt_from_user_quotas(self, tmp_path: Path, llm: FakeLLM) -> None:
        config = make_config(
            tmp_path, llm, usage={"user_daily_tokens": 100}, bot={"admins": ["web:alice"]}
        )
        async with Loopgate(config) as app:
            dm = ChatDriver(app, ChatRef("web", "dm-alice", ChatType.DIRECT))
            llm.script(*(text("ok", usage=(500, 50)) for _ in range(3)))
            for _ in range(2):
                result = await dm.ask("again")
                assert result is not None and result.status is RunStatus.COMPLETED
            bob = ChatDriver(app, ChatRef("web", "dm-bob", ChatType.DIRECT))
            assert (await bob.ask("hi", sender="bob")).status is RunStatus.COMPLETED  # type: ignore[union-attr]
            refused = await bob.ask("again", sender="bob")
            assert refused is not None and refused.status is RunStatus.USAGE_LIMIT

    async def test_an_agent_budget_in_usd_names_the_agent_key(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        config = make_config(
            tmp_path,
            llm,
            providers=provider(llm, pricing=PRICED),
            agents={"main": {"budget": {"daily_usd": 0.001}}},
        )
        async with Loopgate(config) as app:
            dm = ChatDriver(app, ChatRef("web", "dm-alice", ChatType.DIRECT))
            llm.script(text("pricey", usage=(1000, 0)))  # $0.002 > $0.001
            assert (await dm.ask("one")).status is RunStatus.COMPLETED  # type: ignore[union-attr]
            refused = await dm.ask("two", sender="bob")  # every user: the agent's budget
            assert refused is not None and refused.status is RunStatus.USAGE_LIMIT
            assert "daily budget ($0.001)" in dm.texts()[-1]
            last = (await entries(app))[-1]
            assert "agents.main.budget.daily_usd" in last.reason

    async def test_concurrent_runs_reserve_their_estimate_and_do_not_overshoot(
        self, tmp_path: Path, llm: FakeLLM
    ) -> None:
        config = make_config(tmp_path, llm, providers=provider(llm, max_tokens=100))
        async with Loopgate(config) as app:
            estimates: list[int] = []
            reserve = app.meter.reserve

            async def spy(call: Any) -> Any:
                # The exact estimate: the loop hands the input over as a ceiling, counted
                # exactly by the meter when it could decide otherwise (as here, near the limit).
                exact = call.input_tokens if call.exact_input is None else await call.exact_input()
                estimates.append(exact + call.max_output_tokens)
                return await reserve(call)

            app.meter.reserve = spy  # type: ignore[method-assign]
            app.config.usage.user_daily_tokens = 1  # a limit applies: calls are estimated
            # The estimate follows what the provider reports (the token counter is calibrated
            # by it): a first probe calibrates, a second one, whose first run is like each of
            # alice's, measures the estimate they will get.
            for name in ("probe", "probe2"):
                probe = ChatDriver(app, ChatRef("web", f"dm-{name}", ChatType.DIRECT))
                llm.script(text("probe", usage=(1, 1)))
                await probe.ask("same length", sender=name)
            estimate = estimates[-1]
            # Each call really uses its whole estimate: five unchecked would use 5x.
            limit = estimate * 5 // 2
            app.config.usage.user_daily_tokens = limit
            llm.script(*(delay(0.5, text("ok", usage=(estimate - 100, 100))) for _ in range(5)))
            chats = [
                ChatDriver(app, ChatRef("web", f"dm-alice-{i}", ChatType.DIRECT)) for i in range(5)
            ]
            sent = [await chat.send("same length") for chat in chats]
            results = await asyncio.wait_for(asyncio.gather(*sent), 20)  # type: ignore[arg-type]
            statuses = [r.status for r in results if r is not None]
            assert statuses.count(RunStatus.COMPLETED) == 2
            assert statuses.count(RunStatus.USAGE_LIMIT) == 3
            report = await cli_report(app, "by=user")
            [alice] = [row for row in report["rows"] if row["user"] == "web:alice"]
            assert alice["input_tokens"] + alice["output_tokens"] <= limit
