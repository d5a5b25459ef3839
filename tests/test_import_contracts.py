"""The architecture holds: import-linter's contracts ([tool.importlinter] in pyproject.toml) and
no import cycle among our modules, imports under ``if TYPE_CHECKING:`` included."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import grimp

from tests.paths import ROOT

PACKAGES = ("bot", "channels", "agent_core")


def test_the_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint_imports), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_every_agent_core_module_is_behind_a_front_door() -> None:
    # The front-door contract lists agent_core's flat modules by name: a new one must join it.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (front_doors,) = [c for c in contracts if c["name"].startswith("bot takes agent_core")]
    flat = {
        f"agent_core.{path.stem}"
        for path in (ROOT / "agent_core").glob("*.py")
        if path.stem != "__init__"
    }
    assert flat - set(front_doors["forbidden_modules"]) == set()


def module_cycles(graph: grimp.ImportGraph) -> list[set[str]]:
    """Strongly connected groups of modules (Tarjan), leaving out a package importing its own
    submodules (a front door's re-exports are not a design cycle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def edges(module: str) -> set[str]:
        return {
            m
            for m in graph.find_modules_directly_imported_by(module)
            if not m.startswith(module + ".")
        }

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return groups


def test_no_import_cycles_hidden_ones_included() -> None:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False)
    assert module_cycles(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    # The check above must be able to fail: two modules importing each other are one group.
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.a")
    graph.add_import(importer="pkg", imported="pkg.c")
    graph.add_import(importer="pkg.c", imported="pkg")
    assert module_cycles(graph) == [{"pkg.a", "pkg.b"}]
