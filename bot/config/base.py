"""The base of every config section, shared by :mod:`bot.config` and :mod:`bot.config.channels`."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


class StrictModel(BaseModel):
    # Unknown keys are typos more often than not: reject them so they are noticed.
    model_config = ConfigDict(extra="forbid")


def _off(value: Any) -> Any:
    # YAML 1.1 reads a bare ``off`` as False: ``rate_limit: off`` must still mean "off".
    return "off" if value is False else value


OffAllowed = BeforeValidator(_off)
"""For ``Annotated[Settings | Literal["off"], OffAllowed]``: a YAML ``off`` stays "off"."""


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _seconds(value: object) -> object:
    """``90``, ``"90"``, ``"90s"``, ``"15m"``, ``"1h"``, ``"2d"`` → seconds; the rest is left
    for pydantic to reject with the key path."""
    if isinstance(value, str) and (match := _DURATION.match(value)):
        return float(match[1]) * _UNIT_SECONDS[match[2] or "s"]
    return value


Duration = Annotated[float, BeforeValidator(_seconds), Field(ge=0)]
"""A duration in seconds; config files may write ``30s``, ``15m``, ``1h``, ``2d``."""
