"""agent_core/documents.py: the text a model gets for a document."""

from __future__ import annotations

import pytest

from agent_core.documents import (
    DocumentEncrypted,
    DocumentUnreadable,
    document_kind,
    extract_pdf,
    extract_text,
)
from tests.document_support import encrypted_pdf, pdf_with_pages


@pytest.mark.parametrize(
    ("name", "mime", "kind"),
    [
        ("report.pdf", "application/pdf", "pdf"),
        ("scan", "application/pdf", "pdf"),
        ("REPORT.PDF", "application/octet-stream", "pdf"),
        ("notes.md", "", "text"),
        ("data.csv", "text/csv; charset=utf-8", "text"),
        ("x.json", "application/json", "text"),
        ("readme", "text/plain", "text"),
        ("photo.jpg", "image/jpeg", None),
        ("archive.zip", "application/zip", None),
    ],
)
def test_the_kind_comes_from_the_mime_type_or_the_suffix(name: str, mime: str, kind: str) -> None:
    assert document_kind(name, mime) == kind


def test_text_formats_are_decoded_as_they_are() -> None:
    csv = "name,total\nAnna,3\n".encode("utf-8-sig")
    assert extract_text(csv, name="t.csv", mime="text/csv").text == "name,total\nAnna,3\n"
    utf16 = "héllo".encode("utf-16")
    assert extract_text(utf16, name="t.txt", mime="text/plain").text == "héllo"


def test_binary_bytes_named_as_text_are_refused() -> None:
    with pytest.raises(DocumentUnreadable, match="binary"):
        extract_text(b"\x89PNG\x00\x00\x01", name="fake.txt", mime="text/plain")


def test_an_unsupported_type_is_refused_with_its_name() -> None:
    with pytest.raises(DocumentUnreadable, match=r"archive\.zip"):
        extract_text(b"PK\x03\x04", name="archive.zip", mime="application/zip")


def test_a_pdf_gives_the_text_of_its_pages() -> None:
    result = extract_text(pdf_with_pages("Invoice 42", "Total: 17 EUR"), name="a.pdf", mime="")
    assert result.text == "Invoice 42\n\nTotal: 17 EUR"
    assert (result.pages, result.pages_read, result.cut) == (2, 2, False)


def test_the_page_cap_reads_only_the_first_pages_and_says_so() -> None:
    result = extract_pdf(pdf_with_pages("one", "two", "three"), max_pages=2)
    assert result.text == "one\n\ntwo"
    assert (result.pages, result.pages_read, result.cut) == (3, 2, True)


def test_an_encrypted_pdf_is_named_as_such() -> None:
    with pytest.raises(DocumentEncrypted, match="encrypted"):
        extract_pdf(encrypted_pdf("secret text"))


@pytest.mark.parametrize(
    "raw",
    [b"", b"%PDF-1.4\n garbage", pdf_with_pages("cut here")[:200], b"not a pdf at all"],
)
def test_a_corrupt_pdf_is_unreadable_not_a_crash(raw: bytes) -> None:
    with pytest.raises(DocumentUnreadable):
        extract_pdf(raw)
