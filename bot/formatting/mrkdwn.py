"""Slack mrkdwn.

Slack only needs `&`, `<` and `>` escaped, but the same angle brackets carry its special tokens
(`<@U123>` mentions, `<#C123|name>` channels, `<!here>`...). The model copies those verbatim from
the conversation, so they are swapped for placeholders before parsing (markdown would otherwise
mangle or escape them) and put back after rendering.
"""

from __future__ import annotations

import re

from bot.formatting.plain import PlainRenderer, is_linkable

SLACK_TOKEN = re.compile(
    r"<(?:[@][UW][A-Z0-9]+|#[CG][A-Z0-9]+|!(?:here|channel|everyone)|!subteam\^[A-Z0-9]+)"
    r"(?:\|[^<>\n]*)?>"
    r"|<!date\^[^<>\n]+>"
    # Private-use sentinels already in the input are stashed too, so they cannot be mistaken
    # for our placeholders when the text is restored.
    r"|[\ue000\ue001]"
)
_PLACEHOLDER = re.compile("\ue000(\\d+)\ue001")


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_keeping_tokens(text: str) -> str:
    """Escape raw text but leave Slack tokens as they are (used when rendering is bypassed)."""
    out: list[str] = []
    last = 0
    for match in SLACK_TOKEN.finditer(text):
        out.append(escape(text[last : match.start()]))
        out.append(match.group())
        last = match.end()
    out.append(escape(text[last:]))
    return "".join(out)


class MrkdwnRenderer(PlainRenderer):
    def __init__(self) -> None:
        super().__init__()
        self.tokens: list[str] = []

    def render(self, markdown: str) -> str:
        def stash(match: re.Match[str]) -> str:
            self.tokens.append(match.group())
            return f"\ue000{len(self.tokens) - 1}\ue001"

        return self.restore(super().render(SLACK_TOKEN.sub(stash, markdown)), escaped=False)

    def restore(self, text: str, *, escaped: bool) -> str:
        def unstash(match: re.Match[str]) -> str:
            index = int(match.group(1))
            if index >= len(self.tokens):
                return match.group()
            token = self.tokens[index]
            return escape(token) if escaped else token

        return _PLACEHOLDER.sub(unstash, text)

    def text(self, text: str) -> str:
        return escape(text)

    def strong(self, inner: str) -> str:
        return f"*{inner}*" if inner and not self.in_heading else inner

    def em(self, inner: str) -> str:
        return f"_{inner}_" if inner else ""

    def strike(self, inner: str) -> str:
        return f"~{inner}~" if inner else ""

    def code_inline(self, code: str) -> str:
        return f"`{escape(code)}`"

    def link(self, inner: str, href: str, label: str) -> str:
        if not is_linkable(href):
            return super().link(inner, href, label)
        # `|` and `>` would end the URL part early; markdown-it already percent-encodes most.
        url = escape(href).replace("|", "%7C")
        # A token inside the label would close the <url|label> early: show it escaped there.
        label_markup = self.restore(inner, escaped=True)
        if not label_markup or label == href:
            return f"<{url}>"
        return f"<{url}|{label_markup}>"

    def heading(self, inner: str) -> str:
        return f"*{inner}*" if inner else ""

    def code_block(self, code: str, info: str) -> str:
        # Slack ignores a language after the fence, so it is dropped.
        return f"```\n{escape(code)}\n```"

    def table(self, layout: str) -> str:
        return f"```\n{escape(layout)}\n```" if layout else ""
