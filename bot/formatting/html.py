"""Telegram Bot API HTML (parse_mode="HTML").

Telegram accepts only a handful of tags and rejects the whole message on anything else, so the
renderer emits just <b> <i> <s> <code> <pre> <a href> <blockquote>, escapes every piece of text
(raw HTML in the answer included) and respects Telegram's nesting rules: nothing inside
<code>/<pre>, no <code> inside a link, no blockquote inside a blockquote.
"""

from __future__ import annotations

import html
import re

from bot.formatting.plain import PlainRenderer, is_linkable

# The info string is model-controlled; keep it to characters a language name can contain.
_LANGUAGE = re.compile(r"[^\w#+.-]")


def escape(text: str) -> str:
    return html.escape(text, quote=False)


class HtmlRenderer(PlainRenderer):
    def text(self, text: str) -> str:
        return escape(text)

    def strong(self, inner: str) -> str:
        return f"<b>{inner}</b>" if inner and not self.in_heading else inner

    def em(self, inner: str) -> str:
        return f"<i>{inner}</i>" if inner else ""

    def strike(self, inner: str) -> str:
        return f"<s>{inner}</s>" if inner else ""

    def code_inline(self, code: str) -> str:
        # Telegram: a link cannot contain a code entity; keep the text, drop the monospace.
        return escape(code) if self.link_depth else f"<code>{escape(code)}</code>"

    def link(self, inner: str, href: str, label: str) -> str:
        if not is_linkable(href):
            return super().link(inner, href, label)
        return f'<a href="{html.escape(href, quote=True)}">{inner or escape(href)}</a>'

    def heading(self, inner: str) -> str:
        return f"<b>{inner}</b>" if inner else ""

    def code_block(self, code: str, info: str) -> str:
        language = _LANGUAGE.sub("", info.split(maxsplit=1)[0]) if info else ""
        if language:
            return f'<pre><code class="language-{language}">{escape(code)}</code></pre>'
        return f"<pre>{escape(code)}</pre>"

    def blockquote(self, inner: str) -> str:
        # Telegram rejects nested blockquotes: an inner quote keeps a visible "> " instead.
        # (quote_depth counts only the enclosing quotes by the time this hook runs.)
        if self.quote_depth:
            return "\n".join(f"&gt; {line}" if line else "&gt;" for line in inner.split("\n"))
        return f"<blockquote>{inner}</blockquote>" if inner else ""

    def table(self, layout: str) -> str:
        # No table support in Telegram: a monospace block keeps the columns aligned.
        return f"<pre>{escape(layout)}</pre>" if layout else ""
