"""python-telegram-bot's first import, made the way Loopgate wants it (the package imports
this module before anything else).

- ``PTB_TIMEDELTA``: opt in to PTB's future duration type (datetime.timedelta) now. Without it
  PTB 22 emits a deprecation warning from inside its own RetryAfter error on every 429; our
  code reads both.
- Without Telegram Passport's cryptography. PTB imports ``cryptography`` with its first import
  whenever it is installed, only to decrypt Telegram Passport data
  (``telegram._passport.credentials``). Loopgate never decrypts Passport data (it gives PTB no
  private key), but ``cryptography`` is installed anyway (the MCP SDK needs ``pyjwt[crypto]``),
  and loading its Rust extension keeps ~6.5 MiB resident in every process (docs/performance.md,
  round 6). So PTB's first import is made with ``cryptography`` hidden: PTB records Passport
  decryption as unavailable, and nothing else changes. The package is visible again right
  after, so whatever needs it later (MCP's OAuth) imports it as usual.
"""

from __future__ import annotations

import importlib
import os
import sys


def import_without_passport_crypto() -> None:
    """Import ``telegram`` with ``cryptography`` unimportable for the duration; a no-op when
    either is already loaded (then there is nothing left to save)."""
    if "telegram" in sys.modules or "cryptography" in sys.modules:
        return
    # A None entry makes `import cryptography` raise ImportError (the import system's
    # documented way to block a module), which is what PTB checks for.
    sys.modules["cryptography"] = None  # type: ignore[assignment]
    try:
        importlib.import_module("telegram")
    finally:
        del sys.modules["cryptography"]


os.environ.setdefault("PTB_TIMEDELTA", "true")
import_without_passport_crypto()
