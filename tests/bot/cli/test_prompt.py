"""``loopgate prompt`` (``bot/cli/prompt.py``): the system prompt an agent would get, with its
section markers, rendered without touching the disk; and ``preview_files``, which shows the
files a first chat would seed when the user's workspace does not exist yet."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_core import AgentType, PromptMode, Workspaces
from agent_core.bootstrap import BOOTSTRAP_MD, SOUL_MD, USER_MD
from agent_core.sandbox import BwrapSandbox
from bot.agents.exec_setup import ExecRuntime
from bot.cli.prompt import preview_files, render_prompt
from bot.config import Config, parse_config


def config_at(workspace: Path, **agent: object) -> Config:
    return parse_config(
        {"agents": {"defaults": {"workspace": str(workspace)}, "list": [{"id": "main", **agent}]}},
        {},
    )


def sections(prompt: str) -> list[str]:
    return re.findall(r"<!-- section: (\w+) -->", prompt)


def files_on_disk(base: Path) -> list[Path]:
    return sorted(p for p in base.rglob("*")) if base.exists() else []


def test_a_full_prompt_for_a_new_user_writes_nothing(tmp_path: Path) -> None:
    base = tmp_path / "ws"
    prompt = render_prompt(config_at(base), "main", channel="slack", chat_type="group")
    found = sections(prompt)
    assert found[0] == "identity" and "first_run_bootstrap" in found  # the seed's BOOTSTRAP.md
    assert "persona" in found and "user_identity" in found
    assert "session=agent:main:slack:group:preview" in prompt
    assert "in a group chat" in prompt and "slack" in prompt
    # The tools a served agent has: memory search (never searched here) and spawn.
    assert "- memory_search:" in prompt and "- spawn:" in prompt
    assert files_on_disk(base) == []


def test_the_web_tools_of_tools_web_are_listed(tmp_path: Path) -> None:
    config = parse_config(
        {
            "agents": {"defaults": {"workspace": str(tmp_path)}},
            "tools": {"web": {"search": {"brave": {"api_key": "b"}}}},
        },
        {},
    )
    prompt = render_prompt(config, "main", channel="web", chat_type="direct")
    assert "- web_fetch: Fetch a web page" in prompt and "- web_search: Search the web" in prompt


def test_minimal_mode_leaves_out_the_persona_and_user_sections(tmp_path: Path) -> None:
    config = config_at(tmp_path)
    full = sections(render_prompt(config, "main", channel="telegram", chat_type="direct"))
    minimal = sections(
        render_prompt(config, "main", channel="telegram", chat_type="direct", mode="minimal")
    )
    assert set(minimal) < set(full)
    assert {"persona", "user_identity", "first_run_bootstrap"}.isdisjoint(minimal)
    assert "mode=minimal" in render_prompt(
        config, "main", channel="telegram", chat_type="direct", mode="minimal"
    )


def test_an_unknown_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'loud'"):
        render_prompt(config_at(tmp_path), "main", channel="web", chat_type="direct", mode="loud")


def test_an_existing_user_workspace_is_shown_as_it_is(tmp_path: Path) -> None:
    config = config_at(tmp_path, system_prompt="Be terse.")
    workspaces = Workspaces(tmp_path, "main")
    workspaces.ensure_user_files("bob")
    (workspaces.user_dir("bob") / USER_MD).write_text("Bob likes trains.", encoding="utf-8")
    (workspaces.user_dir("bob") / BOOTSTRAP_MD).unlink()  # the first chat is over
    prompt = render_prompt(config, "main", channel="web", chat_type="direct", user_id="bob")
    assert "Bob likes trains." in prompt
    assert "first_run_bootstrap" not in sections(prompt)
    other = render_prompt(config, "main", channel="web", chat_type="direct", user_id="carol")
    assert "Bob likes trains." not in other and "first_run_bootstrap" in sections(other)


@pytest.mark.parametrize("agent_type", [AgentType.OPEN, AgentType.PREDEFINED])
@pytest.mark.parametrize("mode", [PromptMode.FULL, PromptMode.MINIMAL])
def test_the_preview_is_what_a_first_chat_seeds(
    tmp_path: Path, agent_type: AgentType, mode: PromptMode
) -> None:
    preview = Workspaces(tmp_path / "preview", "main", agent_type)
    seeded = Workspaces(tmp_path / "seeded", "main", agent_type)
    seeded.ensure_user_files("alice")

    def named(workspaces: Workspaces, base: Path) -> list[tuple[str, str, Path]]:
        files = (
            preview_files(workspaces, "alice", mode)
            if workspaces is preview
            else workspaces.context_files("alice", mode)
        )
        return [(f.name, f.content, f.path.relative_to(base)) for f in files]

    assert named(preview, tmp_path / "preview") == named(seeded, tmp_path / "seeded")
    assert files_on_disk(tmp_path / "preview") == []


def test_a_predefined_agents_own_files_are_read_before_its_user_exists(tmp_path: Path) -> None:
    workspaces = Workspaces(tmp_path, "main", AgentType.PREDEFINED, max_chars=200)
    workspaces.agent_dir().mkdir(parents=True)
    (workspaces.agent_dir() / SOUL_MD).write_text("Calm and kind. " * 40, encoding="utf-8")
    files = {f.name: f for f in preview_files(workspaces, "alice", PromptMode.FULL)}
    assert set(files) == {"AGENTS.md", SOUL_MD, "TOOLS.md", "IDENTITY.md", USER_MD}
    soul = files[SOUL_MD]
    assert soul.truncated and soul.content.startswith("Calm and kind.")
    assert "truncated" in soul.content and len(soul.content) < 600
    assert files[USER_MD].content == workspaces.template(USER_MD)
    assert not workspaces.user_dir("alice").exists()


def test_custom_templates_are_previewed(tmp_path: Path) -> None:
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / USER_MD).write_text("Ask the user's name first.", encoding="utf-8")
    workspaces = Workspaces(tmp_path / "ws", "main", templates_dir=templates)
    files = {f.name: f.content for f in preview_files(workspaces, "alice", PromptMode.FULL)}
    assert files[USER_MD] == "Ask the user's name first."


class TestExecSections:
    """With ``tools.exec`` on and its sandbox working, the preview shows ``exec`` and prompt
    sections 5 and 14 like a run would; an agent that disables it shows neither."""

    def render(self, tmp_path: Path, **agent: object) -> str:
        data = {
            "agents": {"defaults": {"workspace": str(tmp_path)}, "list": [{"id": "main", **agent}]},
            "tools": {
                "exec": {"enabled": True, "credentials": {"gh": {"command": "gh", "env": {}}}}
            },
        }
        config = parse_config(data, {})
        runtime = ExecRuntime(config.tools.exec, BwrapSandbox())  # as a successful probe left it
        return render_prompt(
            config, "main", channel="slack", chat_type="group", exec_runtime=runtime
        )

    def test_offered(self, tmp_path: Path) -> None:
        prompt = self.render(tmp_path)
        assert {"credentialed_cli", "sandbox"} <= set(sections(prompt))
        assert "- exec: Run a shell command line" in prompt

    def test_disabled_for_the_agent(self, tmp_path: Path) -> None:
        prompt = self.render(tmp_path, disabled_tools=["exec"])
        assert not {"credentialed_cli", "sandbox"} & set(sections(prompt))
        assert "- exec:" not in prompt


def test_the_runtime_section_gives_the_models_price_as_a_run_gets_it(tmp_path: Path) -> None:
    import genai_prices

    table = render_prompt(config_at(tmp_path / "ws"), "main", channel="web", chat_type="direct")
    # the default provider is "openai" with gpt-4o-mini: priced by the table
    assert re.search(
        rf"\npricing: \$[\d.]+/Mtok input, \$[\d.]+/Mtok output, \$[\d.]+/Mtok cached input "
        rf"\(genai-prices {re.escape(genai_prices.__version__)}\)",
        table,
    )
    config = config_at(tmp_path / "ws")
    config.providers.openai.model = "a-local-model"
    assert "pricing:" not in render_prompt(config, "main", channel="web", chat_type="direct")
