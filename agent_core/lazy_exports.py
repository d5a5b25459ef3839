"""A package's names that load with their first use (PEP 562's module ``__getattr__``): what a
package exports but most processes never touch stays out of their memory (the exec sandbox's
backends), or out of an import cycle (the orchestrator)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``where`` maps each lazy name to the module
    that defines it; the first lookup imports that module and keeps the value in the package,
    so later lookups skip this function."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
