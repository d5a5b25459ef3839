"""``loopgate agents list|set|delete`` (``bot/cli/agents.py``), in-process against a temporary
SQLite database: what each command prints and stores, the refusals (exit code 2 before any
write), and the warnings after a delete."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot import cli
from bot.cli import agents as agents_cli
from bot.config import AgentConfig, parse_config
from bot.storage import SqlAgentStore, open_database

CONFIG: dict[str, Any] = {
    "providers": {"ollama": {"base_url": "http://127.0.0.1:9/v1", "model": "llama-x"}},
    "agents": {
        "defaults": {"max_iterations": 7, "context_window": 50_000},
        "list": [{"id": "support", "provider": "ollama", "system_prompt": "be kind"}],
    },
}


def _config_file(tmp_path: Path) -> Path:
    data = {
        "database": {"url": f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"},
        **CONFIG,
        "channels": {"telegram": {"agent": "helper"}},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _stored(tmp_path: Path) -> dict[str, AgentConfig]:
    async def stored() -> dict[str, AgentConfig]:
        async with await open_database(f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}") as db:
            return {s.agent.id: s.agent for s in await SqlAgentStore(db).list()}

    return asyncio.run(stored())


def test_cli_set_list_delete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = str(_config_file(tmp_path))
    code, out, _ = _run(
        capsys, "agents", "set", "helper", "--provider", "ollama", "--model", "q", "--config", cfg
    )
    assert code == 0 and "stored agent helper" in out and "agents.cache_ttl (300 s)" in out
    code, out, _ = _run(
        capsys,
        "agents",
        "set",
        "helper",
        "--max-iterations",
        "5",
        "--system-prompt",
        "hi",
        "--config",
        cfg,
    )
    assert code == 0 and "updated agent helper" in out
    code, out, _ = _run(capsys, "agents", "set", "support", "--model", "big", "--config", cfg)
    assert code == 0
    code, out, _ = _run(capsys, "agents", "list", "--config", cfg)
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert rows["helper"][1:5] == ["db", "ollama", "q", "5"]  # earlier fields kept
    assert rows["support"][1:5] == ["config+db", "ollama", "big", "7"]
    assert rows["main"][1:5] == ["(default)", "defaults", "openai", "gpt-4o-mini"]

    helper = _stored(tmp_path)["helper"]
    assert (helper.model, helper.max_iterations, helper.system_prompt) == ("q", 5, "hi")

    code, out, _ = _run(capsys, "agents", "set", "helper", "--model", "", "--config", cfg)
    assert code == 0 and _stored(tmp_path)["helper"].model is None  # '' clears

    code, out, err = _run(capsys, "agents", "delete", "helper", "--config", cfg)
    assert code == 0 and "deleted stored agent helper" in out
    assert "channels.telegram.agent names helper" in err
    code, out, err = _run(capsys, "agents", "delete", "support", "--config", cfg)
    assert code == 0 and "config.yaml still defines support" in out
    code, _, err = _run(capsys, "agents", "delete", "support", "--config", cfg)
    assert code == 1 and "no stored agent 'support' (it is defined in config.yaml" in err
    assert set(_stored(tmp_path)) == set()


def test_cli_set_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = str(_config_file(tmp_path))
    code, _, err = _run(capsys, "agents", "set", "x", "--provider", "nope", "--config", cfg)
    assert code == 2 and "unknown provider 'nope' (defined: ollama, openai)" in err
    code, _, err = _run(capsys, "agents", "set", "x", "--max-iterations", "0", "--config", cfg)
    assert code == 2 and "max_iterations:" in err
    code, _, err = _run(capsys, "agents", "set", "no spaces", "--config", cfg)
    assert code == 2 and "id:" in err
    code, out, _ = _run(capsys, "agents", "list", "--config", cfg)
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["main", "support"]


def test_list_shows_when_a_stored_agent_was_updated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = str(_config_file(tmp_path))
    assert _run(capsys, "agents", "set", "helper", "--config", cfg)[0] == 0
    code, out, _ = _run(capsys, "agents", "list", "--config", cfg)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == [
        "ID",
        "SOURCE",
        "PROVIDER",
        "MODEL",
        "MAX_ITER",
        "UPDATED",
    ]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["support"][-1] == "-"  # config.yaml only: never stored
    assert rows["helper"][-1] == "UTC" and rows["helper"][-3].count("-") == 2


def test_deleting_an_agent_nothing_routes_to_warns_of_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = str(_config_file(tmp_path))
    assert _run(capsys, "agents", "set", "spare", "--config", cfg)[0] == 0
    code, out, err = _run(capsys, "agents", "delete", "spare", "--config", cfg)
    assert code == 0 and "deleted stored agent spare" in out
    assert err == ""
    assert "config.yaml still defines" not in out


def test_deleting_a_stored_main_warns_of_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # agents.default names main, but main always resolves (from agents.defaults), so its
    # messages keep an agent.
    cfg = str(_config_file(tmp_path))
    assert _run(capsys, "agents", "set", "main", "--model", "m2", "--config", cfg)[0] == 0
    code, out, err = _run(capsys, "agents", "delete", "main", "--config", cfg)
    assert code == 0 and "deleted stored agent main" in out and err == ""


def test_an_unknown_stored_agent_is_exit_1_without_the_config_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = str(_config_file(tmp_path))
    code, out, err = _run(capsys, "agents", "delete", "ghost", "--config", cfg)
    assert (code, out) == (1, "")
    assert err.strip() == "loopgate: no stored agent 'ghost'"


def test_references_name_every_key_that_routes_to_the_agent() -> None:
    config = parse_config(
        {
            "agents": {"default": "helper"},
            "channels": {"slack": {"agent": "helper"}, "zalo": {"agent": "other"}},
        },
        {},
    )
    assert agents_cli._references(config, "helper") == ["agents.default", "channels.slack.agent"]
    assert agents_cli._references(config, "other") == ["channels.zalo.agent"]
    assert agents_cli._references(config, "nobody") == []


async def test_an_unreachable_database_is_exit_2_and_one_line() -> None:
    config = parse_config(
        {"database": {"url": "postgresql+asyncpg://nobody:secret@127.0.0.1:1/none"}}, {}
    )
    out, err = io.StringIO(), io.StringIO()
    assert await agents_cli.list_agents(config, out=out, err=err) == 2
    assert out.getvalue() == "" and err.getvalue().startswith("loopgate: ")
    assert len(err.getvalue().splitlines()) == 1
