"""Signed links to pictures: they name one file until they expire, and can't be forged."""

from __future__ import annotations

from pathlib import Path

from channels.zalo._photo_links import FILES_PATH, LINK_SECONDS, PhotoLinks


def token_of(link: str) -> str:
    return link.split(FILES_PATH, 1)[1].split("/", 1)[0]


def test_a_link_names_its_file_on_the_webhook_host() -> None:
    links = PhotoLinks("https://bot.example.com/zalo/webhook", "s3cret-123", clock=lambda: 1000)
    link = links.link(Path("/ws/user/charts/q 3.png"), "q 3.png")
    assert link.startswith("https://bot.example.com/zalo/files/")
    assert link.endswith("/q%203.png")
    assert links.resolve(token_of(link)) == Path("/ws/user/charts/q 3.png")


def test_an_expired_link_is_refused() -> None:
    now = [1000.0]
    links = PhotoLinks("https://b.example/zalo/webhook", "s3cret-123", clock=lambda: now[0])
    token = token_of(links.link(Path("/ws/a.jpg"), "a.jpg"))
    now[0] += LINK_SECONDS
    assert links.resolve(token) is not None
    now[0] += 1
    assert links.resolve(token) is None


def test_a_changed_path_expiry_or_key_is_refused() -> None:
    links = PhotoLinks("https://b.example/zalo/webhook", "s3cret-123", clock=lambda: 1000)
    encoded, expires, signature = token_of(links.link(Path("/ws/a.jpg"), "a.jpg")).split(".")
    other, _, _ = token_of(links.link(Path("/etc/passwd"), "x")).split(".")
    assert links.resolve(f"{other}.{expires}.{signature}") is None
    assert links.resolve(f"{encoded}.{int(expires) + 60}.{signature}") is None
    elsewhere = PhotoLinks("https://b.example/zalo/webhook", "another-secret", clock=lambda: 1000)
    assert elsewhere.resolve(f"{encoded}.{expires}.{signature}") is None
    for garbage in ("", "a.b", "a.b.c.d", "%%%.1.x", f"{encoded}.soon.{signature}"):
        assert links.resolve(garbage) is None
