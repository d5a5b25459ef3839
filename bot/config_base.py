"""The base of every config section, shared by :mod:`bot.config` and :mod:`bot.channel_config`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    # Unknown keys are typos more often than not: reject them so they are noticed.
    model_config = ConfigDict(extra="forbid")
