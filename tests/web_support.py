"""What the web tools' tests share: a DNS the test writes, a tool context, a guarded client."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from pathlib import Path

from agent_core.tools.base import ToolContext
from agent_core.tools.ssrf import AllowList, WebGuard
from agent_core.tools.web_client import WebClient, WebLimits


class FakeDNS:
    """A resolver (host → addresses) answering from a table, recording each lookup; a list of
    answers for one name is handed out in turn (a rebinding DNS server), the last one repeated."""

    def __init__(self, table: dict[str, list[str] | list[list[str]]] | None = None) -> None:
        self.table = dict(table or {})
        self.lookups: list[str] = []

    def __setitem__(self, host: str, addresses: list[str]) -> None:
        self.table[host] = addresses

    async def __call__(self, host: str) -> list[str]:
        self.lookups.append(host)
        answer = self.table.get(host)
        if answer is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        if answer and isinstance(answer[0], list):
            turn = sum(1 for h in self.lookups if h == host) - 1
            return list(answer[min(turn, len(answer) - 1)])
        return [str(a) for a in answer]


def tool_ctx(
    tmp_path: Path | None = None, *, run_id: str = "run-1", user_id: str = "u1"
) -> ToolContext:
    return ToolContext(
        workspace=tmp_path or Path("."),
        session_key="agent:main:web:direct:c1",
        user_id=user_id,
        agent_id="main",
        run_id=run_id,
    )


def guarded_client(
    dns: FakeDNS,
    allow: Iterable[str] = (),
    *,
    limits: WebLimits | None = None,
    verify: object = True,
) -> WebClient:
    guard = WebGuard(AllowList.parse(allow), resolver=dns)
    return WebClient(guard, limits or WebLimits(), verify=verify)


# A news article shaped like real ones: navigation, a cookie banner, a sidebar of other stories,
# scripts and styles, share buttons, comments and a footer around the text that matters.
ARTICLE_HTML = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Solar sail reaches Mars orbit | Orbit Daily</title>
  <meta name="description" content="A spacecraft pushed by sunlight alone reached Mars.">
  <meta property="og:title" content="Solar sail reaches Mars orbit">
  <meta name="author" content="Ada Lovelace">
  <link rel="stylesheet" href="/static/site.css">
  <style>.cookie-banner{position:fixed;bottom:0}</style>
  <script>window.dataLayer=[];function gtag(){dataLayer.push(arguments)}</script>
  <script type="application/ld+json">{"@type": "NewsArticle", "headline": "Solar sail"}</script>
</head>
<body class="article-page">
  <div class="cookie-banner" id="cookies">We use cookies to improve your experience.
    <button>Accept all</button> <button>Manage preferences</button></div>
  <header class="site-header">
    <a class="logo" href="/">Orbit Daily</a>
    <nav><ul><li><a href="/news">News</a></li><li><a href="/science">Science</a></li>
      <li><a href="/opinion">Opinion</a></li><li><a href="/subscribe">Subscribe</a></li></ul></nav>
  </header>
  <main>
    <article>
      <h1>Solar sail reaches Mars orbit</h1>
      <p class="byline">By <a href="/authors/ada">Ada Lovelace</a> · 3 March 2026</p>
      <div class="share"><a href="#">Share on X</a> <a href="#">Share on Facebook</a></div>
      <p>A spacecraft pushed by <strong>sunlight alone</strong> entered orbit around Mars on
        Tuesday, the mission team said, after an eleven-month cruise without a drop of fuel.</p>
      <p>The probe, called Lumen, unfurled a sail of aluminised polymer thinner than a human
        hair shortly after launch. Photons bouncing off the sail gave it a push that is tiny at
        any moment but never stops.</p>
      <h2>How the sail works</h2>
      <p>Light carries momentum. When a photon reflects off a mirror it transfers twice its
        momentum, and over months those pushes add up to kilometres per second.</p>
      <ul>
        <li>Sail area: 1,200 square metres</li>
        <li>Spacecraft mass: 16 kilograms</li>
        <li>Cruise time: 11 months</li>
      </ul>
      <table>
        <tr><th>Mission</th><th>Year</th><th>Destination</th></tr>
        <tr><td>IKAROS</td><td>2010</td><td>Venus</td></tr>
        <tr><td>Lumen</td><td>2025</td><td>Mars</td></tr>
      </table>
      <p>Engineers now hope to send a larger sail towards Jupiter. The full findings are in
        <a href="https://example.org/lumen-report">the mission report</a>.</p>
    </article>
    <section class="comments"><h3>Comments (2)</h3>
      <div class="comment">First! Great article.</div>
      <div class="comment">Fake news, sails can't work in space.</div></section>
  </main>
  <aside class="sidebar"><h3>Most read</h3><ol>
    <li><a href="/a">Ten celebrities who love astronomy</a></li>
    <li><a href="/b">The best telescopes of the year</a></li></ol></aside>
  <footer><p>© 2026 Orbit Daily. All rights reserved.</p>
    <p><a href="/privacy">Privacy</a> · <a href="/terms">Terms</a> · Newsletter sign-up</p></footer>
  <script src="/static/analytics.js"></script>
</body>
</html>
"""
