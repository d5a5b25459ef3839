"""``loopgate serve`` freezes what start-up made out of the cyclic collector's sight
(bot/cli/command.py): a full collection then walks only what the service made since."""

from __future__ import annotations

import gc

from bot.cli.command import freeze_startup_objects


def test_startup_objects_are_out_of_the_collectors_sight() -> None:
    before = len(gc.get_objects())
    try:
        frozen = freeze_startup_objects()
        assert frozen == gc.get_freeze_count() and frozen > before // 2
        assert len(gc.get_objects()) < before - frozen // 2  # no longer walked
    finally:
        gc.unfreeze()
