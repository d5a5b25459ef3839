"""What a model reads of a fetched body: HTML's readable text as Markdown, text as it is.

HTML goes through trafilatura (main text without navigation, ads and footers, as Markdown with
links and tables); a page where it finds no main text falls back to all of the page's text.
Plain text and JSON stay as they are; PDF goes through :mod:`agent_core.documents`, the
extractor of the documents users send. Anything else is a one-line note saying what it was.

trafilatura and lxml cost tens of megabytes and a tenth of a second to import: they load with the
first HTML page, never at start-up (tests/test_lazy_imports.py).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from agent_core.documents import (
    PDF_MIME,
    DocumentUnreadable,
    decode_text,
    document_kind,
    extract_pdf,
)
from agent_core.tools.web_client import Fetched

HTML_MIMES = frozenset({"text/html", "application/xhtml+xml"})
# Text shown as it is beyond documents.TEXT_MIMES: structured data and source code.
_TEXT_LIKE = frozenset({"application/xml", "application/javascript"})
_SUFFIXES = ("+json", "+xml")
_TRAILING_BLANKS = re.compile(r"[ \t]+\n")


@dataclass(frozen=True, slots=True)
class PageText:
    text: str
    kind: str
    """``html``, ``text``, ``pdf`` or ``other`` (then ``text`` is a note, not the content)."""
    note: str = ""
    """Said beside the content, outside of it (a PDF's page cap, a body cut at max_bytes)."""


def page_text(fetched: Fetched) -> PageText:
    """Raises :class:`DocumentUnreadable` for a PDF that can't be read; a "text" body holding
    binary data gets the note. CPU-bound (an HTML page takes tens of milliseconds): run it in a
    thread."""
    try:
        return _page_text(fetched)
    except DocumentUnreadable:
        if fetched.mime == PDF_MIME:
            raise
        return PageText(binary_note(fetched), "other")


def _page_text(fetched: Fetched) -> PageText:
    mime = fetched.mime
    if mime in HTML_MIMES or (not mime and _looks_like_html(fetched.body)):
        return PageText(html_to_markdown(_decode(fetched), fetched.url), "html")
    kind = document_kind("", mime)
    if mime == PDF_MIME or kind == "pdf":
        if fetched.truncated:
            raise DocumentUnreadable("the PDF is larger than tools.web.max_bytes")
        pdf = extract_pdf(fetched.body)
        note = f"pages 1-{pdf.pages_read} of {pdf.pages}" if pdf.cut else ""
        return PageText(pdf.text, "pdf", note)
    if kind == "text" or mime.startswith("text/") or mime in _TEXT_LIKE or mime.endswith(_SUFFIXES):
        return PageText(_decode(fetched), "text")
    return PageText(binary_note(fetched), "other")


def binary_note(fetched: Fetched) -> str:
    size = f"{len(fetched.body):,} bytes" + (" or more" if fetched.truncated else "")
    return f"[{fetched.mime or 'unknown type'}, {size}: not text, not shown]"


def html_to_markdown(html: str, url: str = "") -> str:
    """The readable text of an HTML page as Markdown ("" when it has none)."""
    import trafilatura  # heavy: only with the first HTML page (module docstring)

    # trafilatura logs each page it finds poor at INFO/WARNING: the tool result says enough.
    logging.getLogger("trafilatura").setLevel(logging.ERROR)
    text = trafilatura.extract(
        html,
        url=url or None,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        include_comments=False,
        with_metadata=False,
    )
    if not text or not text.strip():
        text = trafilatura.html2txt(html)
    # Trailing blanks (trafilatura ends table rows with one) cost tokens and say nothing.
    return _TRAILING_BLANKS.sub("\n", text or "").strip()


def _decode(fetched: Fetched) -> str:
    charset = fetched.charset
    if b"\x00" in fetched.body and not (charset or "").lower().startswith("utf-16"):
        raise DocumentUnreadable("binary data, not text")
    if charset:
        try:
            return fetched.body.decode(charset, errors="replace")
        except LookupError:
            pass  # an unknown charset name: fall back to UTF-8
    return decode_text(fetched.body)


def _looks_like_html(body: bytes) -> bool:
    head = body[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html"))
