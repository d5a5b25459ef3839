"""Plain-text renderer (Zalo) and the tree walker every other flavour builds on.

Plain text is the common denominator: each flavour renders the same block layout (paragraphs,
"• " bullets, "1. " numbers, aligned tables) and only differs in inline markup and escaping, so
the richer renderers subclass this one and override the few hooks below.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

# html=False: raw HTML in the model's answer becomes ordinary text, so each flavour escapes it
# instead of passing it through. Tables and ~~strike~~ are GFM extras the models use a lot.
PARSER = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])

HR = "———"
BULLET = "• "
# Only these schemes become real links: relative or exotic URLs mean nothing in a chat and
# Telegram rejects some of them, so they are shown as "text (url)" instead.
LINKABLE_SCHEMES = ("http://", "https://", "mailto:", "tg://")


def is_linkable(href: str) -> bool:
    return href.lower().startswith(LINKABLE_SCHEMES)


def same_target(text: str, href: str) -> bool:
    """True for autolinks, where repeating the URL after its own text would be noise."""
    return not text or text == href or f"mailto:{text}" == href


def display_width(text: str) -> int:
    """Monospace columns: wide CJK/emoji take two, combining marks none (keeps tables aligned)."""
    width = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def align_table(rows: Sequence[Sequence[str]], aligns: Sequence[str]) -> str:
    """Lay a table out as monospace text: header row, a rule, then the body rows."""
    columns = max((len(row) for row in rows), default=0)
    if columns == 0:
        return ""
    grid = [[*row, *([""] * (columns - len(row)))] for row in rows]
    widths = [max(display_width(row[col]) for row in grid) for col in range(columns)]
    lines: list[str] = []
    for index, row in enumerate(grid):
        cells: list[str] = []
        for col, cell in enumerate(row):
            pad = widths[col] - display_width(cell)
            align = aligns[col] if col < len(aligns) else ""
            if align == "right":
                cells.append(" " * pad + cell)
            elif align == "center":
                cells.append(" " * (pad // 2) + cell + " " * (pad - pad // 2))
            else:
                cells.append(cell + " " * pad)
        lines.append(" | ".join(cells).rstrip())
        if index == 0:
            lines.append("-+-".join("-" * width for width in widths))
    return "\n".join(lines)


def _cell_align(node: SyntaxTreeNode) -> str:
    style = str(node.attrs.get("style", ""))
    return style.removeprefix("text-align:") if style.startswith("text-align:") else ""


class PlainRenderer:
    """Renders a markdown syntax tree as readable plain text; subclasses add markup."""

    def __init__(self) -> None:
        # Depth counters let flavours honour nesting rules (e.g. Telegram: no code in links).
        self.link_depth = 0
        self.quote_depth = 0
        self.in_heading = False  # headings are already bold: inner bold would double up

    def render(self, markdown: str) -> str:
        tree = SyntaxTreeNode(PARSER.parse(markdown))
        return self.blocks(tree.children, "\n\n").strip("\n")

    # --- hooks the flavours override -------------------------------------------------------

    def text(self, text: str) -> str:
        return text

    def strong(self, inner: str) -> str:
        return inner

    def em(self, inner: str) -> str:
        return inner

    def strike(self, inner: str) -> str:
        return inner

    def code_inline(self, code: str) -> str:
        return code

    def link(self, inner: str, href: str, label: str) -> str:
        """`inner` is rendered markup, `label` the same text without markup."""
        if not href:
            return inner
        if same_target(label, href):
            return self.text(label or href)
        return f"{inner} ({self.text(href)})"

    def heading(self, inner: str) -> str:
        return inner

    def code_block(self, code: str, info: str) -> str:
        return code

    def blockquote(self, inner: str) -> str:
        return "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))

    def table(self, layout: str) -> str:
        return layout

    def hr(self) -> str:
        return HR

    # --- tree walking ----------------------------------------------------------------------

    def blocks(self, nodes: Sequence[SyntaxTreeNode], sep: str) -> str:
        parts = (self.block(node) for node in nodes)
        return sep.join(part for part in parts if part)

    def block(self, node: SyntaxTreeNode) -> str:
        kind = node.type
        if kind == "paragraph":
            return self.inlines(node.children)
        if kind == "heading":
            self.in_heading = True
            try:
                return self.heading(self.inlines(node.children))
            finally:
                self.in_heading = False
        if kind in ("bullet_list", "ordered_list"):
            return self.list_(node)
        if kind == "blockquote":
            self.quote_depth += 1
            try:
                inner = self.blocks(node.children, "\n\n")
            finally:
                self.quote_depth -= 1
            return self.blockquote(inner)
        if kind in ("fence", "code_block"):
            return self.code_block(node.content.rstrip("\n"), node.info.strip())
        if kind == "hr":
            return self.hr()
        if kind == "table":
            return self.table(self.table_layout(node))
        return self.text(node.content.rstrip("\n"))

    def list_(self, node: SyntaxTreeNode) -> str:
        ordered = node.type == "ordered_list"
        start = int(str(node.attrs.get("start", 1))) if ordered else 1
        lines: list[str] = []
        for index, item in enumerate(node.children):
            marker = f"{start + index}. " if ordered else BULLET
            body = self.blocks(item.children, "\n").split("\n")
            lines.append((marker + body[0]).rstrip())
            # Continuation lines line up under the item text, which also nests sub-lists.
            lines.extend(" " * len(marker) + line if line else line for line in body[1:])
        return "\n".join(lines)

    def table_layout(self, node: SyntaxTreeNode) -> str:
        rows: list[list[str]] = []
        aligns: list[str] = []
        for section in node.children:
            for row in section.children:
                cells = [plain_text(cell.children) for cell in row.children]
                rows.append([" ".join(cell.split()) for cell in cells])
                if not aligns:
                    aligns = [_cell_align(cell) for cell in row.children]
        return align_table(rows, aligns)

    def inlines(self, nodes: Sequence[SyntaxTreeNode]) -> str:
        out: list[str] = []
        for node in nodes:
            if node.type == "inline":  # paragraphs and headings wrap their inline run
                out.append(self.inlines(node.children))
            else:
                out.append(self.inline(node))
        return "".join(out)

    def inline(self, node: SyntaxTreeNode) -> str:
        kind = node.type
        if kind in ("softbreak", "hardbreak"):
            return "\n"
        if kind == "strong":
            return self.strong(self.inlines(node.children))
        if kind == "em":
            return self.em(self.inlines(node.children))
        if kind == "s":
            return self.strike(self.inlines(node.children))
        if kind == "code_inline":
            return self.code_inline(node.content)
        if kind == "image":
            # Chats cannot inline an image mid-text: show it as a link to the picture, or only
            # its alt text inside a link (links cannot nest).
            alt = plain_text(node.children)
            if self.link_depth:
                return self.text(alt)
            return self.link(self.text(alt), str(node.attrs.get("src", "")), alt)
        if kind == "link":
            if self.link_depth:
                return self.inlines(node.children)
            self.link_depth += 1
            try:
                inner = self.inlines(node.children)
            finally:
                self.link_depth -= 1
            return self.link(inner, str(node.attrs.get("href", "")), plain_text(node.children))
        return self.text(node.content)


def plain_text(nodes: Sequence[SyntaxTreeNode]) -> str:
    """Markup-free text of inline nodes: table cells and link labels need it in every flavour."""
    return PlainRenderer().inlines(nodes)
