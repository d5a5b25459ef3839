"""Turning a document (a file a user sent, a page body fetched) into text a model can read.

Text formats (plain text, Markdown, CSV, JSON) are decoded as they are; a PDF goes through pypdf,
page by page up to a cap, because a 600-page manual would otherwise cost minutes of CPU before
the model reads a line of it. What can't be read raises :class:`DocumentUnreadable`, with
:class:`DocumentEncrypted` apart so the user can be told the one thing they can fix.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from pathlib import PurePath

from agent_core.errors import AgentError

MAX_PDF_PAGES = 50
"""Pages of a PDF that are read; the note on the result says how many the file has."""

TEXT_MIMES = frozenset(
    {
        "text/plain",
        "text/markdown",
        "text/x-markdown",
        "text/csv",
        "application/json",
        "application/csv",
    }
)
TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".csv", ".json"})
PDF_MIME = "application/pdf"


class DocumentUnreadable(AgentError, ValueError):
    """The bytes are not a readable document of a supported kind (corrupt, binary, empty)."""


class DocumentEncrypted(DocumentUnreadable):
    """A PDF protected by a password: its text can't be read without it."""


@dataclass(frozen=True, slots=True)
class ExtractedText:
    text: str
    pages: int | None = None
    """Pages in the PDF (``None`` for text formats)."""
    pages_read: int | None = None

    @property
    def cut(self) -> bool:
        """Pages were left out by the page cap."""
        if self.pages is None or self.pages_read is None:
            return False
        return self.pages_read < self.pages


def document_kind(name: str, mime: str) -> str | None:
    """``"pdf"``, ``"text"`` or ``None`` (not a document this module reads)."""
    mime = mime.split(";", 1)[0].strip().lower()
    suffix = PurePath(name).suffix.lower()
    if mime == PDF_MIME or suffix == ".pdf":
        return "pdf"
    if mime in TEXT_MIMES or suffix in TEXT_SUFFIXES:
        return "text"
    return None


def extract_text(
    raw: bytes, *, name: str, mime: str, max_pages: int = MAX_PDF_PAGES
) -> ExtractedText:
    """The text of a document. Raises :class:`DocumentUnreadable` (or its subclass)."""
    kind = document_kind(name, mime)
    if kind == "pdf":
        return extract_pdf(raw, max_pages=max_pages)
    if kind == "text":
        return ExtractedText(decode_text(raw))
    raise DocumentUnreadable(f"{name}: not a supported document type ({mime or 'unknown'})")


def decode_text(raw: bytes) -> str:
    """UTF-8 (a BOM dropped) or UTF-16 with its BOM; anything holding NUL bytes is binary."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise DocumentUnreadable(f"not valid UTF-16 text: {exc}") from exc
    if b"\x00" in raw:
        raise DocumentUnreadable("binary data, not text")
    # errors="replace": a stray Latin-1 byte in a CSV export should not lose the whole file.
    return raw.decode("utf-8-sig", errors="replace")


def extract_pdf(raw: bytes, *, max_pages: int = MAX_PDF_PAGES) -> ExtractedText:
    """The text of the first ``max_pages`` pages, pages separated by a blank line."""
    # pypdf loads with the first PDF, not at start-up (what a start imports: issue 16).
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    # pypdf warns through logging about every small defect of real-world PDFs; not our news.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(raw))
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentEncrypted("the PDF is encrypted (password protected)")
        total = len(reader.pages)
        texts = [reader.pages[i].extract_text() or "" for i in range(min(total, max_pages))]
    except DocumentUnreadable:
        raise
    except PdfReadError as exc:
        raise DocumentUnreadable(f"not a readable PDF: {exc}") from exc
    except Exception as exc:
        # A corrupt PDF can fail deep inside pypdf with anything (KeyError, ValueError,
        # RecursionError...): for us it is one case, a file that can't be read.
        raise DocumentUnreadable(f"not a readable PDF: {type(exc).__name__}: {exc}") from exc
    return ExtractedText("\n\n".join(t.strip() for t in texts).strip(), total, len(texts))
