"""channels/telegram/_errors.py: python-telegram-bot errors translated to channel errors."""

from __future__ import annotations

import pytest
from telegram import error as tg

from channels import BadRequest, Forbidden, RetryAfter
from channels.telegram import translate_telegram_errors
from channels.telegram._errors import ChatMigrated, TelegramTimedOut, TelegramUnavailable


class TestErrors:
    @pytest.mark.parametrize(
        ("raised", "expected"),
        [
            (tg.RetryAfter(3), RetryAfter),
            (tg.Forbidden("Forbidden: bot was blocked by the user"), Forbidden),
            (tg.BadRequest("Bad Request: can't parse entities"), BadRequest),
            (tg.ChatMigrated(-100), ChatMigrated),
            (tg.TimedOut(), TelegramTimedOut),
            (tg.NetworkError("Bad Gateway"), TelegramUnavailable),
        ],
    )
    def test_translation(self, raised: Exception, expected: type[Exception]) -> None:
        with pytest.raises(expected) as info, translate_telegram_errors():
            raise raised
        assert info.value.__cause__ is raised
        if isinstance(info.value, RetryAfter):
            assert info.value.retry_after == 3
