"""agent_core/settings.py: the derived switches of the agent's settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core.settings import (
    AgentSettings,
    CompactionSettings,
    MemoryFlushSettings,
    PruningSettings,
)


@pytest.mark.parametrize(("mode", "enabled"), [("", True), ("cache-ttl", True), ("off", False)])
def test_pruning_is_on_unless_mode_is_off(mode: str, enabled: bool) -> None:
    assert PruningSettings(mode=mode).enabled is enabled


def test_compaction_triggers_at_the_threshold_by_default() -> None:
    assert CompactionSettings(threshold=0.6).trigger_share == 0.6


def test_max_history_share_overrides_the_threshold() -> None:
    assert CompactionSettings(threshold=0.6, max_history_share=0.4).trigger_share == 0.4
    # 0 is a value, not "unset": it must not fall back to the threshold.
    assert CompactionSettings(threshold=0.6, max_history_share=0.0).trigger_share == 0.0


def test_nested_defaults_are_not_shared_between_instances() -> None:
    a = AgentSettings(id="a", model="m", workspace=Path("/tmp/a"))
    b = AgentSettings(id="b", model="m", workspace=Path("/tmp/b"))
    assert a.compaction == b.compaction and a.compaction is not b.compaction
    assert a.compaction.memory_flush == MemoryFlushSettings()
    assert "NO_REPLY" in a.compaction.memory_flush.prompt  # the flush may stay silent
