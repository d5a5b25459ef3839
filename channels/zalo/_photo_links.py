"""Short-lived signed links to pictures, so Zalo's ``sendPhoto`` can fetch them from Loopgate.

The Zalo Bot API takes no upload: ``sendPhoto``'s ``photo`` is a URL that Zalo's servers
download. In webhook mode Loopgate's own server is public (``webhook_url``), so a picture the
agent sends is offered there, at ``{origin of webhook_url}/zalo/files/{token}/{name}``, for
:data:`LINK_SECONDS`. The token is stateless: the file's path and expiry, signed with a key
derived from ``webhook_secret`` (HMAC-SHA256), so every process of a cluster that shares the
workspaces can serve it, and nobody can forge a link to another file. The path is encoded, not
hidden: only Zalo's servers see the link.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, urlsplit

FILES_PATH = "/zalo/files/"
LINK_SECONDS = 600


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class PhotoLinks:
    """Signs and checks the links of one bot (one ``webhook_secret``)."""

    def __init__(
        self, webhook_url: str, secret: str, *, clock: Callable[[], float] = time.time
    ) -> None:
        parts = urlsplit(webhook_url)
        self.base = f"{parts.scheme}://{parts.netloc}{FILES_PATH}"
        self._key = hashlib.sha256(b"loopgate zalo photo links\0" + secret.encode()).digest()
        self._clock = clock

    def link(self, path: Path, name: str) -> str:
        expires = int(self._clock()) + LINK_SECONDS
        encoded = _b64(os.fsencode(path))
        return f"{self.base}{encoded}.{expires}.{self._sign(encoded, expires)}/{quote(name)}"

    def resolve(self, token: str) -> Path | None:
        """The file a token names, or None when it is forged, damaged or expired."""
        try:
            encoded, expires_text, signature = token.split(".")
            expires = int(expires_text)
        except ValueError:
            return None
        if not hmac.compare_digest(signature, self._sign(encoded, expires)):
            return None
        if expires < self._clock():
            return None
        try:
            return Path(os.fsdecode(_unb64(encoded)))
        except (binascii.Error, ValueError):
            return None

    def _sign(self, encoded: str, expires: int) -> str:
        message = f"{encoded}.{expires}".encode()
        return _b64(hmac.new(self._key, message, hashlib.sha256).digest()[:24])
