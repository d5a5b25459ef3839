"""python-telegram-bot's first import, without Telegram Passport's cryptography, in new
interpreters (this one has imported everything the other tests needed)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from channels.telegram import _ptb
from tests.paths import ROOT


def run(code: str, cwd: Path, *, env: dict[str, str] | None = None, path: str = "") -> str:
    """Run ``code`` in a new interpreter; its stdout."""
    pythonpath = os.pathsep.join(p for p in (path, str(ROOT)) if p)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env={"PYTHONPATH": pythonpath, "PATH": "/usr/bin:/bin", **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def imported_after(code: str, cwd: Path) -> set[str]:
    """The top-level packages in ``sys.modules`` after running ``code``."""
    out = run(textwrap.dedent(code) + "\nimport sys\nprint(' '.join(sorted(sys.modules)))\n", cwd)
    return {name.split(".")[0] for name in out.split()}


def test_the_telegram_channel_does_not_load_cryptography_and_leaves_it_importable(
    tmp_path: Path,
) -> None:
    # python-telegram-bot loads cryptography (~6.5 MiB resident) only for Telegram Passport
    # decryption, which Loopgate never does (channels/telegram/_ptb.py).
    modules = imported_after(
        """
        import sys
        import channels.telegram
        from telegram import Bot, Update

        assert "cryptography" not in sys.modules
        from telegram._passport.credentials import CRYPTO_INSTALLED
        assert CRYPTO_INSTALLED is False
        # An update carrying Passport data still parses and normalizes.
        update = Update.de_json(
            {
                "update_id": 1,
                "message": {
                    "message_id": 5,
                    "date": 1700000000,
                    "chat": {"id": 9, "type": "private"},
                    "from": {"id": 9, "is_bot": False, "first_name": "A"},
                    "text": "hi",
                    "passport_data": {
                        "data": [],
                        "credentials": {"data": "ZA==", "hash": "aA==", "secret": "cw=="},
                    },
                },
            },
            Bot("1:x"),
        )
        assert update.message.passport_data is not None
        identity = channels.telegram.BotIdentity(id=1, username="bot")
        inbound = channels.telegram.normalize_update(update, identity)
        assert inbound is not None and inbound.text == "hi", inbound
        import cryptography.hazmat.primitives.ciphers  # others may still use it (fails the run)
        """,
        tmp_path,
    )
    assert "telegram" in modules


def test_with_cryptography_already_loaded_telegram_imports_as_usual(tmp_path: Path) -> None:
    out = run(
        """
        import cryptography
        import channels.telegram
        from telegram._passport.credentials import CRYPTO_INSTALLED
        print(CRYPTO_INSTALLED)
        """,
        tmp_path,
    )
    assert out.split() == ["True"]


def test_a_failed_telegram_import_leaves_cryptography_importable(tmp_path: Path) -> None:
    broken = tmp_path / "shadow" / "telegram"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('a broken telegram')\n")
    out = run(
        """
        import sys
        try:
            import channels.telegram
        except ImportError as exc:
            print("failed:", exc)
        print("blocked" if "cryptography" in sys.modules else "free")
        import cryptography
        print("importable")
        """,
        tmp_path,
        path=str(tmp_path / "shadow"),
    )
    assert out.splitlines() == ["failed: a broken telegram", "free", "importable"]


def test_ptb_timedelta_is_opted_in_unless_set(tmp_path: Path) -> None:
    code = """
        import os
        import channels.telegram
        print(os.environ["PTB_TIMEDELTA"])
        """
    assert run(code, tmp_path).split() == ["true"]
    assert run(code, tmp_path, env={"PTB_TIMEDELTA": "false"}).split() == ["false"]


def test_a_second_call_is_a_no_op() -> None:
    # This interpreter has telegram loaded: nothing to hide, nothing to import.
    before = sys.modules.get("cryptography", "absent")
    _ptb.import_without_passport_crypto()
    assert sys.modules.get("cryptography", "absent") is before
    assert "telegram" in sys.modules
