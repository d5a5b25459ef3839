"""The base of every config section, shared by :mod:`bot.config` and :mod:`bot.channel_config`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, BeforeValidator, ConfigDict


class StrictModel(BaseModel):
    # Unknown keys are typos more often than not: reject them so they are noticed.
    model_config = ConfigDict(extra="forbid")


def _off(value: Any) -> Any:
    # YAML 1.1 reads a bare ``off`` as False: ``rate_limit: off`` must still mean "off".
    return "off" if value is False else value


OffAllowed = BeforeValidator(_off)
"""For ``Annotated[Settings | Literal["off"], OffAllowed]``: a YAML ``off`` stays "off"."""
