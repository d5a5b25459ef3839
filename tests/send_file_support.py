"""What the ``send_file`` tests share (issue 29): files in a user's workspace, and what the
fake model was told by the tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_core import user_workspace
from tests.fakes.llm_server import FakeLLM, ScriptItem, call, tool_calls


def workspace_file(tmp_path: Path, user_id: str, name: str, data: bytes | None = None) -> Path:
    """The file ``name`` in ``user_id``'s workspace (``<channel>:<sender>``), written when
    ``data`` is given."""
    path = user_workspace(tmp_path / "workspaces", user_id) / name
    if data is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return path


def sparse_file(path: Path, size: int) -> Path:
    """A file that says it has ``size`` bytes without taking the disk space."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        out.truncate(size)
    return path


def send_file(path: str, caption: str | None = None) -> ScriptItem:
    """The fake model's call of the tool."""
    arguments: dict[str, Any] = {"path": path}
    if caption is not None:
        arguments["caption"] = caption
    return tool_calls(call("send_file", arguments))


def tool_results(llm: FakeLLM) -> list[str]:
    """Every tool result the model was shown in its last request."""
    return [str(m["content"]) for m in llm.last_request.json["messages"] if m["role"] == "tool"]
