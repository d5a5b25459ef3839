"""The dashboard's "Scheduled" page: jobs listed with their next run and last outcome, and the
pause, resume and remove forms (CSRF-checked), against a started Loopgate."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from agent_core import parse_schedule
from bot.app import Loopgate
from bot.storage.cron import SqlCronJobs
from bot.storage.models import utcnow
from channels import ChatRef, ChatType, InboundMessage, Sender
from tests.admin_support import admin_config, client_of, csrf_of, log_in
from tests.fakes.llm_server import FakeLLM


@pytest.fixture
async def admin_app(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[Loopgate]:
    async with Loopgate(admin_config(tmp_path, llm)) as started:
        yield started


@pytest.fixture
async def browser(admin_app: Loopgate) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_of(admin_app):
        assert (await log_in(client)).status_code == 303
        yield client


async def add_job(app: Loopgate, schedule: str = "0 9 * * 1-5", message: str = "invoices") -> str:
    now = utcnow()
    parsed = parse_schedule(schedule, "Europe/Berlin", now, min_interval=60)
    origin = InboundMessage(
        chat=ChatRef("telegram", "100", ChatType.DIRECT),
        message_id="5",
        sender=Sender("1", "Ann"),
        text="x",
        received_at=now,
    )
    job = await SqlCronJobs(app.db).add(
        agent_id="main",
        session_key="agent:main:telegram:direct:100",
        origin=origin,
        schedule=parsed,
        message=message,
        next_run_at=parsed.first_run(now),
    )
    return job.id


async def test_the_page_lists_jobs_and_is_in_the_menu(
    admin_app: Loopgate, browser: httpx.AsyncClient
) -> None:
    empty = await browser.get("/admin/scheduled")
    assert empty.status_code == 200 and "No scheduled job." in empty.text
    job_id = await add_job(admin_app, message="<b>send</b> the invoices")
    page = await browser.get("/admin/scheduled")
    assert f'data-job-id="{job_id}"' in page.text
    assert "0 9 * * 1-5" in page.text and "telegram:100" in page.text
    assert "&lt;b&gt;send&lt;/b&gt; the invoices" in page.text  # escaped
    assert "Europe/Berlin" in page.text  # the next run, in the job's zone
    assert '<a href="/admin/scheduled"' in (await browser.get("/admin/runs")).text


async def test_pause_resume_and_remove(admin_app: Loopgate, browser: httpx.AsyncClient) -> None:
    job_id = await add_job(admin_app)
    jobs = SqlCronJobs(admin_app.db)
    token = csrf_of((await browser.get("/admin/scheduled")).text)

    paused = await browser.post(f"/admin/scheduled/{job_id}/pause", data={"csrf_token": token})
    assert paused.status_code == 303 and "paused" in paused.headers["location"]
    job = await jobs.get(job_id)
    assert job is not None and job.paused
    page = (await browser.get("/admin/scheduled")).text
    assert "<strong>paused</strong>" in page and "Resume" in page
    assert await jobs.due(utcnow().replace(year=2100)) == []  # a paused job is never due

    await browser.post(f"/admin/scheduled/{job_id}/resume", data={"csrf_token": token})
    job = await jobs.get(job_id)
    assert job is not None and not job.paused

    removed = await browser.post(f"/admin/scheduled/{job_id}/remove", data={"csrf_token": token})
    assert removed.status_code == 303 and "removed" in removed.headers["location"]
    assert await jobs.get(job_id) is None
    again = await browser.post(f"/admin/scheduled/{job_id}/remove", data={"csrf_token": token})
    assert "No+scheduled+job" in again.headers["location"]


async def test_a_form_without_the_csrf_token_changes_nothing(
    admin_app: Loopgate, browser: httpx.AsyncClient
) -> None:
    job_id = await add_job(admin_app)
    refused = await browser.post(f"/admin/scheduled/{job_id}/remove", data={})
    assert refused.status_code == 403
    assert await SqlCronJobs(admin_app.db).get(job_id) is not None


async def test_anonymous_visitors_are_refused(admin_app: Loopgate) -> None:
    job_id = await add_job(admin_app)
    async for client in client_of(admin_app):
        page = await client.get("/admin/scheduled")
        assert page.status_code in (302, 303, 401) and job_id not in page.text
        posted = await client.post(f"/admin/scheduled/{job_id}/remove")
        assert posted.status_code in (302, 303, 401, 403)
    assert await SqlCronJobs(admin_app.db).get(job_id) is not None
