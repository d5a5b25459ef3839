"""config.yaml: ``tools.exec``: defaults, the ``off`` YAML trap, credentials, the deny list;
errors name the key."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from bot.config import ConfigFileError, parse_config
from bot.redaction import secrets_of


def problems(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigFileError) as info:
        parse_config(data, {})
    return str(info.value)


def test_defaults_are_off_and_safe() -> None:
    exec_config = parse_config({}, {}).tools.exec
    assert not exec_config.enabled and exec_config.sandbox == "bwrap"
    assert not exec_config.network and exec_config.timeout == 30
    assert exec_config.memory == 512 << 20 and exec_config.max_output == 16 << 10
    assert exec_config.approval is None and exec_config.approval_timeout == 300
    assert exec_config.deny_patterns  # the built-in list


@pytest.mark.parametrize("written", ["off", '"off"', "ask", "deny_patterns"])
def test_approval_modes_including_a_bare_yaml_off(written: str) -> None:
    data = yaml.safe_load(f"tools:\n  exec:\n    approval: {written}\n")
    assert parse_config(data, {}).tools.exec.approval == written.strip('"')


def test_sizes_and_durations_in_their_units() -> None:
    data = {"tools": {"exec": {"memory": "1GiB", "max_output": "4KiB", "timeout": "2m"}}}
    exec_config = parse_config(data, {}).tools.exec
    assert exec_config.memory == 1 << 30 and exec_config.max_output == 4096
    assert exec_config.timeout == 120


def test_credentials_read_the_environment_and_are_masked_in_logs() -> None:
    data = {
        "tools": {
            "exec": {"credentials": {"github": {"command": "gh", "env": {"GH_TOKEN": "${GH}"}}}}
        }
    }
    config = parse_config(data, {"GH": "ghp_abcdefghijk"})
    assert config.tools.exec.credentials["github"].env == {"GH_TOKEN": "ghp_abcdefghijk"}
    assert "ghp_abcdefghijk" in secrets_of(config)


@pytest.mark.parametrize(
    ("exec_keys", "message"),
    [
        ({"sandbox": "chroot"}, "tools.exec.sandbox: input should be 'bwrap', 'docker' or 'none'"),
        ({"approval": "maybe"}, "tools.exec.approval"),
        ({"deny_patterns": ["ok", "(unclosed"]}, "deny_patterns.1: not a regular expression"),
        ({"credentials": {"gh": {"command": "gh x"}}}, "tools.exec.credentials.gh.command"),
        ({"credentials": {"gh": {"command": "gh", "env": {"BAD-NAME": "x"}}}}, "env.BAD-NAME"),
        ({"timeout": 0}, "tools.exec.timeout"),
        ({"sandbox_dir": "/x"}, "tools.exec.sandbox_dir: unknown key"),
    ],
)
def test_bad_values_name_their_key(exec_keys: dict[str, Any], message: str) -> None:
    assert message in problems({"tools": {"exec": exec_keys}})


@pytest.mark.parametrize(
    ("command", "refused"),
    [
        ("rm -rf /", True),
        ("rm -rf / --no-preserve-root", True),
        ("rm -fr /*", True),
        ("rm -r -f ~", True),
        (":(){ :|:& };:", True),
        ("mkfs.ext4 /dev/sda1", True),
        ("dd if=/dev/zero of=/dev/sda", True),
        ("sudo reboot", True),
        ("rm -rf build/", False),
        ("rm -rf ./tmp /workspace/out", False),
        ("dd if=in.img of=out.img", False),
        ("git log --oneline | head", False),
    ],
)
def test_the_default_deny_list(command: str, refused: bool) -> None:
    patterns = parse_config({}, {}).tools.exec.deny_patterns
    assert any(re.search(p, command) for p in patterns) is refused
