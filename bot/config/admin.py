"""``admin:``, the operator dashboard's settings (:mod:`bot.admin`)."""

from __future__ import annotations

from pydantic import Field, field_validator

from bot.config.base import Duration, StrictModel

MIN_TOKEN_CHARS = 16


class AdminConfig(StrictModel):
    token: str = ""
    """The dashboard is served under ``/admin`` only when this is set (``${ADMIN_TOKEN}``);
    without it ``/admin`` does not exist (404)."""
    session_max_age: Duration = Field(12 * 3600.0, gt=0)
    """Seconds a login (the session cookie) lasts, or ``30m``, ``8h``, ``7d``."""

    @field_validator("token")
    @classmethod
    def _long_enough(cls, value: str) -> str:
        # Whoever has it can stop runs and rewrite agents' prompts: no guessable passwords.
        if value and len(value) < MIN_TOKEN_CHARS:
            raise ValueError(
                f"at least {MIN_TOKEN_CHARS} characters (e.g. the output of `openssl rand -hex 32`)"
            )
        return value
