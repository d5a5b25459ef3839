"""The dashboard's "Usage" page and ``/admin/api/usage`` (``bot/admin/usage.py``), in-process
against a started Loopgate whose rollup holds some usage."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from bot.app import Loopgate
from bot.storage.usage import UsageKey, UsageTotals, hour_of
from tests.admin_support import BEARER, admin_config, client_of, log_in
from tests.fakes.llm_server import FakeLLM


@pytest.fixture
async def admin_app(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Loopgate]:
    async with Loopgate(admin_config(tmp_path, llm)) as started:
        now = datetime.now(UTC)
        store = started.meter.store
        for at, user, totals in (
            (now, "telegram:1", UsageTotals.of_call(1000, 100, 300, 0.5, True)),
            (now - timedelta(days=2), "slack:U9", UsageTotals.of_call(400, 40, 0, None, True)),
            (now - timedelta(days=20), "telegram:1", UsageTotals.of_call(9, 9, 0, 9.0, True)),
        ):
            key = UsageKey(hour_of(at), "main", user.split(":")[0], user, "openai", "gpt-x")
            store.add(key, totals)
        yield started


@pytest.fixture
async def api(admin_app: Loopgate) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_of(admin_app, headers=BEARER):
        yield client


async def test_the_api_answers_totals_rows_and_every_day(api: httpx.AsyncClient) -> None:
    report = (await api.get("/admin/api/usage", params={"by": "user"})).json()
    assert (report["input_tokens"], report["output_tokens"], report["runs"]) == (1400, 140, 2)
    assert report["cost_usd"] == 0.5 and report["unpriced_calls"] == 1
    assert [(r["user"], r["cost_usd"]) for r in report["rows"]] == [
        ("telegram:1", 0.5),
        ("slack:U9", None),
    ]
    days = report["days"]
    assert len(days) == 8 and report["period"] == "7d"
    assert [d["input_tokens"] for d in days][-3:] == [400, 0, 1000]
    month = (await api.get("/admin/api/usage", params={"since": "30d"})).json()
    assert month["runs"] == 3 and month["by"] == "model" and len(month["days"]) == 31


async def test_a_bad_period_is_a_400_naming_it(api: httpx.AsyncClient) -> None:
    answer = await api.get("/admin/api/usage", params={"since": "soon"})
    assert answer.status_code == 400 and "'soon' is not a period" in answer.json()["error"]
    answer = await api.get("/admin/api/usage", params={"by": "weather"})
    assert answer.status_code == 400 and "by: 'weather'" in answer.json()["error"]


async def test_without_the_token_nothing_is_shown(admin_app: Loopgate) -> None:
    async for client in client_of(admin_app):
        assert (await client.get("/admin/api/usage")).status_code == 401
        assert (await client.get("/admin/usage")).status_code == 401


async def test_the_page_shows_the_totals_and_embeds_the_report_for_its_charts(
    admin_app: Loopgate,
) -> None:
    async for client in client_of(admin_app):
        assert (await log_in(client)).status_code == 303
        page = (await client.get("/admin/usage", params={"by": "channel"})).text
        assert 'data-total="input_tokens">1,400<' in page
        assert 'data-total="cost_usd">0.5000<' in page
        assert re.search(r'<tr data-key="slack">\s*<td>slack</td>', page)
        assert "/static/uPlot.iife.min.js" in page and "/static/usage.js" in page
        embedded = re.search(
            r'<script type="application/json" id="usage-data">(.*?)</script>', page
        )
        assert embedded is not None and json.loads(embedded[1])["by"] == "channel"
        for name in ("uPlot.iife.min.js", "uPlot.min.css", "usage.js"):
            assert (await client.get(f"/admin/static/{name}")).status_code == 200
        bad = await client.get("/admin/usage", params={"since": "soon"})
        assert bad.status_code == 400 and "is not a period" in bad.text


async def test_a_trace_page_shows_each_llm_calls_cost(tmp_path: Path, llm: FakeLLM) -> None:
    from channels import ChatRef, ChatType
    from tests.conftest import ChatDriver
    from tests.fakes.llm_server import text

    pricing = {"input_per_mtok": 2, "output_per_mtok": 8}
    provider = {"openai": {"base_url": llm.base_url, "model": "fake-model", "pricing": pricing}}
    async with Loopgate(admin_config(tmp_path, llm, providers=provider)) as app:
        llm.script(text("hi", usage=(1000, 100)))
        await ChatDriver(app, ChatRef("web", "dm", ChatType.DIRECT)).ask("hello")
        async for client in client_of(app):
            assert (await log_in(client)).status_code == 303
            trace = (await client.get("/admin/api/traces?last=1")).json()["traces"][0]
            page = (await client.get(f"/admin/traces/{trace['id']}")).text
            assert '<span class="cost">$0.002800</span>' in page
