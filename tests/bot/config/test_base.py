"""What every config section shares (``bot/config/base.py``): unknown keys refused, a YAML
``off`` kept as "off", and durations written with a unit."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import ValidationError

from bot.config.base import Duration, OffAllowed, StrictModel


class Section(StrictModel):
    wait: Duration = 0.0
    limit: Annotated[int | Literal["off"], OffAllowed] = 5


@pytest.mark.parametrize(
    ("given", "seconds"),
    [
        (90, 90.0),
        (1.5, 1.5),
        ("90", 90.0),
        ("90s", 90.0),
        (" 15m ", 900.0),
        ("1h", 3600.0),
        ("2d", 172800.0),
        ("250ms", 0.25),
        ("1.5 h", 5400.0),
        ("0", 0.0),
    ],
)
def test_durations(given: object, seconds: float) -> None:
    assert Section.model_validate({"wait": given}).wait == seconds


@pytest.mark.parametrize("bad", ["soon", "10 minutes", "5w", "-3s", -1, "1h30m", ""])
def test_bad_durations_are_refused(bad: object) -> None:
    with pytest.raises(ValidationError) as raised:
        Section.model_validate({"wait": bad})
    assert raised.value.errors()[0]["loc"] == ("wait",)


def test_a_yaml_off_is_off_and_other_values_are_kept() -> None:
    assert Section.model_validate({"limit": False}).limit == "off"  # YAML 1.1's bare `off`
    assert Section.model_validate({"limit": "off"}).limit == "off"
    assert Section.model_validate({"limit": 0}).limit == 0  # not mistaken for False
    assert Section.model_validate({"limit": 7}).limit == 7


def test_unknown_keys_are_refused() -> None:
    with pytest.raises(ValidationError) as raised:
        Section.model_validate({"wiat": 3})
    assert [(e["loc"], e["type"]) for e in raised.value.errors()] == [
        (("wiat",), "extra_forbidden")
    ]
