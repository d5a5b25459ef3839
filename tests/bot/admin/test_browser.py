"""The dashboard in a real browser: headless Chromium (Debian's ``chromium`` package) driven by
Playwright, against Loopgate served by uvicorn on 127.0.0.1 with its Telegram channel talking
to the fake Bot API server.

No browser is downloaded (``playwright install`` is not needed): Playwright launches
``/usr/bin/chromium``. Without it these tests fail, on purpose, with what to install: ``.ci/run``
installs it. The screenshot of the live-runs page goes to ``docs/admin-dashboard.png`` when that
file is missing or ``LOOPGATE_UPDATE_SCREENSHOT=1`` is set (otherwise to the test's tmp dir, so
a test run leaves the work tree clean).
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bot.app import Loopgate
from bot.http.server import create_app
from bot.storage import SqlAgentStore
from bot.storage.cron import SqlCronJobs
from tests.admin_support import TOKEN, admin_config, seed_suggestion
from tests.fakes.llm_server import FakeLLM, call, delay, text, tool_calls
from tests.fakes.loopback import LoopbackServer
from tests.fakes.telegram_server import FakeTelegram
from tests.paths import ROOT
from tests.service_support import until
from tests.telegram_support import reactions, telegram_section

try:
    from playwright.async_api import Browser, Page, async_playwright, expect
except ImportError:  # reported by the fixture below, as a failure
    async_playwright = None  # type: ignore[assignment]

CHROMIUM = Path(os.environ.get("LOOPGATE_CHROMIUM", "/usr/bin/chromium"))
# Without the background-networking flags Chromium waits for Google services on a closed network.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = ROOT / "docs" / "admin-dashboard.png"
USER = 42


@dataclass
class Served:
    app: Loopgate
    base: str
    llm: FakeLLM
    tg: FakeTelegram


@pytest.fixture
async def served(tmp_path: Path, llm: FakeLLM, tg: FakeTelegram) -> AsyncIterator[Served]:
    telegram = telegram_section(tg)
    config = admin_config(tmp_path, llm, channels={"telegram": telegram})
    async with Loopgate(config) as app:
        server = LoopbackServer(create_app(app, manage_lifespan=False), name="loopgate")
        port = await server.start()
        try:
            yield Served(app, f"http://127.0.0.1:{port}", llm, tg)
        finally:
            await server.stop()


@pytest.fixture
def chromium() -> Path:
    if async_playwright is None:
        pytest.fail("the browser tests need Playwright: pip install -e '.[dev]'")
    if not CHROMIUM.exists():
        pytest.fail(
            f"the browser tests need Chromium at {CHROMIUM}: apt-get install -y chromium "
            "(.ci/run does), or point LOOPGATE_CHROMIUM at another Chromium"
        )
    return CHROMIUM


@pytest.fixture
async def browser(chromium: Path) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(chromium), args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            await launched.close()


async def signed_in(browser: Browser, served: Served) -> Page:
    page = await browser.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(15_000)
    first = await page.goto(f"{served.base}/admin/")
    assert first is not None and first.status == 401  # the login form, nothing else
    await page.get_by_label("Token").fill(TOKEN)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Live runs")).to_be_visible()
    await expect(page.locator("#live-state")).to_have_text("on")
    return page


def typing_calls(tg: FakeTelegram) -> int:
    return len(tg.calls_of("sendChatAction"))


async def test_watch_stop_and_trace_a_telegram_run(
    served: Served, browser: Browser, tmp_path: Path
) -> None:
    llm, tg = served.llm, served.tg
    tg.push(tg.private_message("good morning", user_id=USER))  # an earlier, finished chat
    await tg.wait_for(lambda: tg.texts() == ["echo: good morning"])
    page = await signed_in(browser, served)
    await page.evaluate("window.notReloaded = true")

    llm.script(tool_calls(call("list_files", {})), delay(30, text("never delivered")))
    update = tg.private_message("summarise my files", user_id=USER)
    message_id = update["message"]["message_id"]
    tg.push(update)
    row = page.locator("#runs tbody tr")
    await expect(row).to_have_count(1)  # arrived over the event stream, no reload
    await expect(row).to_contain_text("telegram")
    await expect(row).to_contain_text(f"direct {USER}")
    await expect(row.locator("td.tool")).to_have_text("thinking")
    await expect(page.locator("#activity")).to_contain_text("tool.call list_files")
    assert await page.evaluate("window.notReloaded") is True
    run_id = await row.get_attribute("data-run-id")
    assert run_id is not None
    await page.screenshot(path=_screenshot_path(tmp_path))

    await until(lambda: typing_calls(tg) > 0, lambda: "no typing before the stop")
    await row.get_by_role("button", name="Stop").click()
    await expect(page.locator(".notice.ok")).to_have_text(f"Run {run_id} stopped.")
    await expect(page.locator("#no-runs")).to_be_visible()
    # The chat is cleaned up as /stop leaves it: told, reaction cleared, typing over.
    await tg.wait_for(lambda: tg.texts()[-1:] == ["Stopped."])
    await tg.wait_for(lambda: reactions(tg, message_id)[-1:] == [""])
    assert reactions(tg, message_id)[0] == "👀"
    cleared_at = [
        c.at
        for c in tg.calls_of("setMessageReaction")
        if c.params["message_id"] == message_id and not c.params.get("reaction")
    ][-1]
    assert all(c.at <= cleared_at for c in tg.calls_of("sendChatAction"))
    assert "never delivered" not in tg.texts()
    assert served.app.registry.active_runs == 0

    await page.get_by_role("link", name="Traces").click()
    cancelled = page.locator("tr", has_text="cancelled")
    await cancelled.get_by_role("link", name="tree").click()
    await expect(page.get_by_role("heading", name=re.compile("^Trace"))).to_be_visible()
    await expect(page.locator("main")).to_contain_text(run_id)
    await expect(page.locator("main")).to_contain_text("cancelled")
    await expect(page.locator("li.kind-tool")).to_contain_text("list_files")
    await expect(page.locator("li.kind-llm").first).to_contain_text("tokens")


async def test_approve_a_suggestion(served: Served, browser: Browser) -> None:
    suggestion = await seed_suggestion(served.app)
    page = await signed_in(browser, served)
    await page.get_by_role("link", name="Suggestions").click()
    row = page.locator(f"tr[data-suggestion-id='{suggestion.id}']")
    await expect(row).to_contain_text("max_iterations 20 → 22")
    await expect(row.locator("td.status")).to_have_text("pending")
    await row.get_by_role("button", name="Approve").click()
    await expect(page.locator(".notice.ok")).to_have_text("Suggestion approved: now applied.")
    await expect(row.locator("td.status")).to_contain_text("applied")
    await expect(row).to_contain_text("admin (session)")
    stored = await SqlAgentStore(served.app.db).get("main")
    assert stored is not None and stored.agent.max_iterations == 22
    await page.get_by_role("link", name="Agents").click()
    await expect(page.locator("table")).to_contain_text("22")


async def test_anonymous_visitors_get_nothing(served: Served, browser: Browser) -> None:
    tg = served.tg
    tg.push(tg.private_message("my private question", user_id=USER))
    await tg.wait_for(lambda: tg.texts() == ["echo: my private question"])
    context = await browser.new_context()  # no cookie
    page = await context.new_page()
    for path in ("/admin/api/sessions", "/admin/api/runs", "/admin/api/events"):
        response = await page.goto(f"{served.base}{path}")
        assert response is not None and response.status == 401, path
        body = await response.text()
        assert "private question" not in body and str(USER) not in body, path
    response = await page.goto(f"{served.base}/admin/sessions")
    assert response is not None and response.status == 401
    await expect(page.get_by_label("Token")).to_be_visible()
    assert "private question" not in await page.content()
    await page.get_by_label("Token").fill("not-the-admin-token")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_have_text("That token is not right.")
    await context.close()
    # And the same over plain HTTP, with a forged cookie.
    async with httpx.AsyncClient(cookies={"loopgate_admin": "a.1.b"}) as client:
        forged = await client.get(f"{served.base}/admin/api/sessions")
    assert forged.status_code == 401 and "private" not in forged.text


def _screenshot_path(tmp_path: Path) -> Path:
    if os.environ.get("LOOPGATE_UPDATE_SCREENSHOT") == "1" or not SCREENSHOT.exists():
        return SCREENSHOT
    return tmp_path / SCREENSHOT.name


async def test_pause_resume_and_remove_a_scheduled_job(served: Served, browser: Browser) -> None:
    llm, tg = served.llm, served.tg
    add = {"action": "add", "schedule": "in 1h", "message": "Remind the user to call Anna."}
    llm.script(tool_calls(call("cron", add)), text("I'll remind you in an hour."))
    tg.push(tg.private_message("remind me in an hour to call Anna", user_id=USER))
    await tg.wait_for(lambda: tg.texts() == ["I'll remind you in an hour."])
    page = await signed_in(browser, served)
    await page.get_by_role("link", name="Scheduled").click()
    row = page.locator("#scheduled tbody tr")
    await expect(row).to_have_count(1)
    await expect(row).to_contain_text("Remind the user to call Anna.")
    await expect(row).to_contain_text(f"telegram:{USER}")
    job_id = await row.get_attribute("data-job-id")
    assert job_id is not None

    await row.get_by_role("button", name="Pause").click()
    await expect(page.locator(".notice.ok")).to_have_text(f"Job {job_id} paused.")
    await expect(row.locator("td.next")).to_have_text("paused")
    await row.get_by_role("button", name="Resume").click()
    await expect(page.locator(".notice.ok")).to_have_text(f"Job {job_id} resumed.")
    await expect(row.locator("td.next")).to_contain_text("UTC")
    await row.get_by_role("button", name="Remove").click()
    await expect(page.locator(".notice.ok")).to_have_text(f"Job {job_id} removed.")
    await expect(page.locator("#no-jobs")).to_be_visible()
    assert await SqlCronJobs(served.app.db).list() == []


async def test_usage_page_draws_the_days_and_matches_the_cli_and_the_api(
    served: Served, browser: Browser
) -> None:
    import io
    import json
    from argparse import Namespace

    from bot.cli import usage as usage_cli

    llm, tg = served.llm, served.tg
    llm.script(
        tool_calls(call("list_files", {}), usage=(1200, 40), cached_tokens=200),
        text("Here you go.", usage=(1500, 60)),
    )
    tg.push(tg.private_message("what is in my folder?", user_id=USER))
    await tg.wait_for(lambda: tg.texts() == ["Here you go."])
    await served.app.meter.store.flush()  # written behind the runs, within a second
    out = io.StringIO()
    await usage_cli.run(served.app.config, Namespace(since="7d", by="user", json=True), out)
    cli = json.loads(out.getvalue())
    async with httpx.AsyncClient(base_url=served.base) as client:
        api = (
            await client.get(
                "/admin/api/usage",
                params={"since": "7d", "by": "user"},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
        ).json()
    totals = ("input_tokens", "cached_input_tokens", "output_tokens", "runs")
    assert [cli[k] for k in totals] == [api[k] for k in totals] == [2700, 200, 100, 1]
    assert api["rows"] == cli["rows"]
    assert api["days"][-1]["input_tokens"] == 2700 and len(api["days"]) == 8

    page = await signed_in(browser, served)
    await page.get_by_role("link", name="Usage").click()
    await expect(page.get_by_role("heading", name="Usage", exact=True)).to_be_visible()
    await page.get_by_label("By").select_option("user")
    await page.get_by_role("button", name="Show").click()
    shown = page.locator("#usage-totals")
    await expect(shown.locator('[data-total="input_tokens"]')).to_have_text("2,700")
    await expect(shown.locator('[data-total="cached_input_tokens"]')).to_have_text("200")
    await expect(shown.locator('[data-total="output_tokens"]')).to_have_text("100")
    await expect(shown.locator('[data-total="runs"]')).to_have_text("1")
    await expect(shown.locator('[data-total="cost_usd"]')).to_have_text("unknown")
    await expect(page.locator("#usage-rows tbody tr")).to_have_text(re.compile(f"telegram:{USER}"))
    # uPlot drew both charts (a canvas each) over the 8 days of the period
    for chart in ("#tokens-chart", "#cost-chart"):
        await expect(page.locator(f"{chart} canvas")).to_have_count(1)
        await expect(page.locator(chart)).to_have_attribute("data-points", "8")
    await expect(page.locator(".u-legend").first).to_contain_text("input")
