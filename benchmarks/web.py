"""web_fetch benchmark: what one fetch of a 200 KB article page costs beyond the HTTP transfer.

A loopback server (tests/fakes/web_server.py) serves an article-shaped HTML page of about
200 KB; ``web_fetch`` reads it through the whole path (the SSRF guard with ``allow_hosts``
opening the server, the pinned guarded client, trafilatura's Markdown extraction in a thread,
the caps and the wrapper). Beside it, the same page fetched by a bare ``httpx.AsyncClient`` (the
transfer alone) and trafilatura's extraction alone. The framework overhead is the fetch minus
the bare transfer minus the extraction: what the guard, the pinning, the body cap, the thread
hop and the wrapping cost.

    python benchmarks/web.py [--fetches 200] [--page-kb 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_core.tools import AllowList, FetchCounter, FetchPolicy, WebClient, WebGuard
from agent_core.tools.web import web_fetch_tool
from agent_core.tools.web_extract import html_to_markdown
from bot.logging_setup import configure_logging
from tests.fakes.web_server import FakeWeb
from tests.web_support import ARTICLE_HTML, tool_ctx


def article_page(kb: int) -> str:
    """ARTICLE_HTML with its article grown to about ``kb`` kilobytes of paragraphs."""
    head, tail = ARTICLE_HTML.split("</article>", 1)
    filler: list[str] = []
    size = len(ARTICLE_HTML)
    day = 0
    while size < kb * 1024:
        day += 1
        # Each paragraph its own: identical ones would be dropped as boilerplate.
        paragraph = (
            f"<p>Day {day}: the sail turned a steady rain of photons into a push that never "
            f"stopped; engineers logged {day * 13} readings and tilted it by {day % 7} tenths "
            f"of a degree to keep the probe on course for orbit insertion.</p>\n"
        )
        filler.append(paragraph)
        size += len(paragraph)
    return head + "".join(filler) + "</article>" + tail


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def line(name: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (
        f"{name:<28} p50 {pct(ms, 0.5):7.2f} ms   p90 {pct(ms, 0.9):7.2f} ms   "
        f"p99 {pct(ms, 0.99):7.2f} ms"
    )


async def bench(fetches: int, page_kb: int) -> dict[str, float]:
    page = article_page(page_kb)
    async with FakeWeb() as site:
        site.page("/article", page)
        url = site.url("/article")
        guard = WebGuard(AllowList.parse(["127.0.0.1"]))
        client = WebClient(guard)
        tool = web_fetch_tool(
            client,
            FetchPolicy(max_chars=1_000_000, max_fetches_per_run=fetches * 10),
            counter=FetchCounter(),
        )
        ctx = tool_ctx()
        bare = httpx.AsyncClient(trust_env=False)
        html_to_markdown(page)  # trafilatura's import and first-call costs are not per fetch
        for _ in range(5):  # warm-up: connections, thread pool
            await tool.handler({"url": url}, ctx)
            await bare.get(url)
        full: list[float] = []
        transfer: list[float] = []
        extraction: list[float] = []
        for _ in range(fetches):
            t0 = time.perf_counter()
            out = await tool.handler({"url": url}, ctx)
            full.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            body = (await bare.get(url)).text
            transfer.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            html_to_markdown(body, url)
            extraction.append(time.perf_counter() - t0)
        await bare.aclose()
        await client.aclose()
    assert out.startswith("<external_content") and len(out) > page_kb * 200, out[:200]
    overhead = [f - t - e for f, t, e in zip(full, transfer, extraction, strict=True)]
    print(f"web_fetch of a {len(page.encode()) / 1024:.0f} KB article page, {fetches} fetches")
    print(line("web_fetch (whole call)", full))
    print(line("bare httpx GET", transfer))
    print(line("trafilatura extraction", extraction))
    print(line("framework overhead", overhead))
    ratio = statistics.median(full) / (statistics.median(transfer) + statistics.median(extraction))
    print(f"whole call / (transfer + extraction), medians: {ratio:.2f}")
    return {
        "page_bytes": len(page.encode()),
        "fetch_p50_ms": pct(full, 0.5) * 1000,
        "fetch_p99_ms": pct(full, 0.99) * 1000,
        "transfer_p50_ms": pct(transfer, 0.5) * 1000,
        "extraction_p50_ms": pct(extraction, 0.5) * 1000,
        "overhead_p50_ms": pct(overhead, 0.5) * 1000,
        "overhead_p99_ms": pct(overhead, 0.99) * 1000,
        "ratio": ratio,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fetches", type=int, default=200)
    parser.add_argument("--page-kb", type=int, default=200)
    args = parser.parse_args()
    configure_logging("warning", "console")
    print(json.dumps(asyncio.run(bench(args.fetches, args.page_kb))))


if __name__ == "__main__":
    main()
