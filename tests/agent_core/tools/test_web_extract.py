"""What a model reads of a body: HTML's main text as Markdown, text as it is, PDF's text, a note
for the rest."""

from __future__ import annotations

import json

import pytest

from agent_core.documents import DocumentUnreadable
from agent_core.tools.web_client import Fetched
from agent_core.tools.web_extract import html_to_markdown, page_text
from tests.document_support import encrypted_pdf, pdf_with_pages
from tests.web_support import ARTICLE_HTML


def fetched(body: bytes, content_type: str, *, truncated: bool = False) -> Fetched:
    return Fetched("https://news.example/article", 200, content_type, body, truncated)


class TestHtml:
    def test_an_article_page_becomes_the_markdown_of_its_text(self) -> None:
        page = page_text(fetched(ARTICLE_HTML.encode(), "text/html; charset=utf-8"))
        assert page.kind == "html"
        text = page.text
        assert text.startswith("# Solar sail reaches Mars orbit")
        assert "## How the sail works" in text
        assert "pushed by **sunlight alone** entered orbit" in text
        assert "- Sail area: 1,200 square metres" in text
        assert "[the mission report](https://example.org/lumen-report)" in text
        assert "| Lumen | 2025 | Mars |" in text
        # What surrounds the article is not its text.
        for noise in ("cookies", "Subscribe", "Most read", "All rights reserved", "dataLayer"):
            assert noise not in text, noise

    def test_a_page_without_a_main_text_falls_back_to_all_its_text(self) -> None:
        html = "<html><body><div><span>Status:</span> <b>all systems normal</b></div></body></html>"
        assert "all systems normal" in html_to_markdown(html)

    def test_html_is_recognised_without_a_content_type(self) -> None:
        page = page_text(fetched(b"<!DOCTYPE html><html><body><p>Plain page</p></body></html>", ""))
        assert page.kind == "html" and "Plain page" in page.text

    def test_the_declared_charset_is_used(self) -> None:
        html = "<html><body><article><p>Ça coûte cher, à Paris, été.</p></article></body></html>"
        page = page_text(fetched(html.encode("latin-1"), "text/html; charset=ISO-8859-1"))
        assert "Ça coûte cher, à Paris, été." in page.text


class TestOtherTypes:
    def test_plain_text_and_json_as_they_are(self) -> None:
        assert page_text(fetched(b"line 1\n  line 2\n", "text/plain")).text == "line 1\n  line 2\n"
        data = json.dumps({"a": [1, 2], "b": "<p>not html</p>"}, indent=2).encode()
        page = page_text(fetched(data, "application/json"))
        assert page.kind == "text" and page.text == data.decode()
        assert page_text(fetched(b'{"x": 1}', "application/problem+json")).text == '{"x": 1}'

    def test_pdf_through_the_documents_extractor(self) -> None:
        page = page_text(fetched(pdf_with_pages("First page", "Second page"), "application/pdf"))
        assert page.kind == "pdf"
        assert "First page" in page.text and "Second page" in page.text

    def test_an_encrypted_pdf_is_unreadable(self) -> None:
        with pytest.raises(DocumentUnreadable, match="encrypted"):
            page_text(fetched(encrypted_pdf("secret"), "application/pdf"))

    def test_a_pdf_cut_by_max_bytes_is_unreadable(self) -> None:
        body = pdf_with_pages("First page")
        with pytest.raises(DocumentUnreadable, match=r"larger than tools\.web\.max_bytes"):
            page_text(fetched(body[:100], "application/pdf", truncated=True))

    def test_a_binary_body_is_a_short_note(self) -> None:
        png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 10
        page = page_text(fetched(png, "image/png"))
        assert page.kind == "other"
        assert page.text == "[image/png, 2,568 bytes: not text, not shown]"

    def test_binary_bytes_declared_as_text_are_a_note_too(self) -> None:
        page = page_text(fetched(b"MZ\x00\x00\x90\x00binary", "text/plain"))
        assert page.kind == "other" and "not text" in page.text
