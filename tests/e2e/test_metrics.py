"""``GET /metrics`` after real turns (issue 32, point 4): Telegram updates from the fake Bot API,
answers from the fake model, the scrape read back with prometheus-client's own parser."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bot.app import Loopgate
from bot.http.server import create_app
from channels.telegram._channel import SECRET_HEADER
from tests.cluster_support import ClusterConfig, needs_postgres, needs_redis
from tests.fakes.llm_server import FakeLLM, call, delay, error, text, tool_calls
from tests.fakes.telegram_server import FakeTelegram
from tests.inbound_support import webhook_client
from tests.telegram_support import channel_of, telegram_section, tg_config
from tests.waiting import wait_until

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@asynccontextmanager
async def http(app: Loopgate) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(create_app(app, manage_lifespan=False))
    async with httpx.AsyncClient(transport=transport, base_url="http://loopgate") as client:
        yield client


async def scrape(client: httpx.AsyncClient) -> tuple[set[str], Samples]:
    """The family names and every sample, keyed by sample name and labels."""
    response = await client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    names: set[str] = set()
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        names.add(family.name)
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return names, samples


async def pending(app: Loopgate, entries: int) -> bool:
    assert app.inbox is not None
    return sum((await app.inbox.counts()).values()) == entries


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def matching(samples: Samples, name: str, **labels: str) -> dict[frozenset[Any], float]:
    want = set(labels.items())
    return {key[1]: v for key, v in samples.items() if key[0] == name and want <= key[1]}


async def test_turns_runs_model_and_tool_calls_tokens_and_states_after_real_replies(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    async with Loopgate(tg_config(tmp_path, llm, tg)) as app, http(app) as client:
        # 1: two tools (one fails), then an answer; the model takes 0.3 s for it.
        llm.script(
            tool_calls(call("list_files"), call("read_file", {"path": "nope.txt"}), usage=(50, 5)),
            delay(0.3, text("done with tools", usage=(100, 7))),
        )
        tg.push(tg.private_message("use your tools"))
        await tg.wait_for(lambda: len(tg.sent) == 1)
        # 2: NO_REPLY sends nothing; 3: the model refuses (400, not retried): the apology.
        llm.script(text("NO_REPLY", usage=(20, 1)))
        tg.push(tg.private_message("say nothing"))
        await wait_until(lambda: app.telemetry.metrics.turns.get(("telegram", "no_reply")))
        llm.script(error(400, "bad request"))
        tg.push(tg.private_message("fail please"))
        await tg.wait_for(lambda: len(tg.sent) == 2)
        # 4: stopped while the model thinks.
        llm.script(delay(30, text("never sent")))
        tg.push(tg.private_message("think long"))
        await tg.wait_for(lambda: not llm.remaining)
        tg.push(tg.private_message("/stop"))
        await tg.wait_for(lambda: len(tg.sent) == 3)
        assert tg.texts()[0] == "done with tools" and tg.texts()[2] == "Stopped."
        # "Stopped." may go out before the stopped turn has ended.
        await wait_until(lambda: app.telemetry.metrics.turns.get(("telegram", "stopped")))
        names, samples = await scrape(client)

    assert all(name.startswith("loopgate_") for name in names), names
    turns = {
        dict(labels)["outcome"]: v
        for labels, v in matching(samples, "loopgate_turns_total", channel="telegram").items()
    }
    assert turns == {"reply": 1, "no_reply": 1, "error": 1, "stopped": 1}

    runs = "loopgate_run_duration_seconds_count"
    assert value(samples, runs, agent="main", status="completed") == 2
    assert value(samples, runs, agent="main", status="error") == 1
    assert value(samples, runs, agent="main", status="cancelled") == 1

    ok = {"provider": "openai", "model": "fake-model", "outcome": "ok"}
    assert value(samples, "loopgate_llm_duration_seconds_count", **ok) == 3
    failed = {**ok, "outcome": "error"}
    assert value(samples, "loopgate_llm_duration_seconds_count", **failed) == 1
    stopped = {**ok, "outcome": "cancelled"}
    assert value(samples, "loopgate_llm_duration_seconds_count", **stopped) == 1
    # The 0.3 s call is never in the 0.25 s bucket; seconds, not milliseconds, are summed.
    fast = value(samples, "loopgate_llm_duration_seconds_bucket", le="0.25", **ok)
    assert fast is not None and fast <= 2
    assert value(samples, "loopgate_llm_duration_seconds_bucket", le="+Inf", **ok) == 3
    took = value(samples, "loopgate_llm_duration_seconds_sum", **ok)
    assert took is not None and 0.3 <= took < 30

    tools = "loopgate_tool_calls_total"
    assert value(samples, tools, tool="list_files", outcome="ok") == 1
    assert value(samples, tools, tool="read_file", outcome="error") == 1

    tokens = "loopgate_llm_tokens_total"
    assert value(samples, tokens, agent="main", model="fake-model", kind="input") == 170
    assert value(samples, tokens, agent="main", model="fake-model", kind="output") == 13
    assert not matching(samples, "loopgate_cost_usd_total")  # no price known yet

    assert value(samples, "loopgate_active_runs") == 0
    assert value(samples, "loopgate_channel_up", channel="telegram") == 1
    assert value(samples, "loopgate_inbox_depth", state="queued") == 0
    assert value(samples, "loopgate_inbox_depth", state="running") == 0
    assert value(samples, "loopgate_inbox_oldest_age_seconds") == 0
    assert value(samples, "loopgate_process_resident_memory_bytes")


async def test_a_busy_chat_shows_its_active_run_and_inbox_backlog(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    async with Loopgate(tg_config(tmp_path, llm, tg)) as app, http(app) as client:
        llm.script(delay(30, text("slow")))
        tg.push(tg.private_message("first"))
        await tg.wait_for(lambda: llm.chat_requests)
        tg.push(tg.private_message("second"))  # a DM runs one at a time: this one waits
        await wait_until(lambda: pending(app, 2))
        _, samples = await scrape(client)
    assert value(samples, "loopgate_active_runs") == 1
    assert value(samples, "loopgate_inbox_depth", state="running") == 1
    assert value(samples, "loopgate_inbox_depth", state="queued") == 1
    age = value(samples, "loopgate_inbox_oldest_age_seconds")
    assert age is not None and 0 < age < 30


async def test_a_channel_that_is_down_reads_0(
    tmp_path: Path, llm: FakeLLM, tg: FakeTelegram
) -> None:
    tg.fail_next("getMe", 502, count=100)  # start-up keeps retrying in the background
    async with Loopgate(tg_config(tmp_path, llm, tg)) as app, http(app) as client:
        _, samples = await scrape(client)
    assert value(samples, "loopgate_channel_up", channel="telegram") == 0
    assert value(samples, "loopgate_channel_up", channel="web") == 1


@needs_redis
@needs_postgres
async def test_with_redis_each_process_counts_what_it_did_and_the_sum_is_the_service(
    cluster_config: ClusterConfig, tg: FakeTelegram
) -> None:
    secret = "metrics-cluster-secret"
    telegram = telegram_section(
        tg, mode="webhook", webhook_url="https://bot.example/telegram/webhook",
        webhook_secret=secret,
    )  # fmt: skip
    async with AsyncExitStack() as stack:
        apps = [
            await stack.enter_async_context(
                Loopgate(cluster_config(channels={"telegram": telegram}))
            )
            for _ in range(2)
        ]
        # Three chats to each process's webhook: each chat is answered where it arrived.
        for n in range(6):
            channel = channel_of(apps[n % 2])
            hook = webhook_client(channel.webhook_path, channel.handle_webhook)
            stack.push_async_callback(hook.aclose)
            update = {"update_id": tg.new_update_id(), **tg.private_message(f"m{n}", user_id=n)}
            response = await hook.post(
                channel.webhook_path, json=update, headers={SECRET_HEADER: secret}
            )
            assert response.status_code == 200
        await tg.wait_for(lambda: len(tg.texts()) == 6)
        await wait_until(lambda: all_turns(apps) == 6)
        scrapes = []
        for app in apps:
            async with http(app) as client:
                scrapes.append((await scrape(client))[1])
    replies = [
        value(s, "loopgate_turns_total", channel="telegram", outcome="reply") for s in scrapes
    ]
    assert replies == [3, 3]
    runs = [
        value(s, "loopgate_run_duration_seconds_count", agent="main", status="completed")
        for s in scrapes
    ]
    assert runs == [3, 3]
    # The inbox is the service's: both processes report the same.
    assert [value(s, "loopgate_inbox_depth", state="queued") for s in scrapes] == [0, 0]


def all_turns(apps: list[Loopgate]) -> float:
    return sum(sum(app.telemetry.metrics.turns.values()) for app in apps)
