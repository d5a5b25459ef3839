"""One exception root per package: every exception class defined in ``agent_core`` derives from
:class:`agent_core.errors.AgentError`, every one in ``channels`` from
:class:`channels.errors.ChannelError` and every one in ``bot`` from :class:`bot.errors.BotError`,
so a caller can catch a layer's failures with one clause."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from types import ModuleType

import pytest

import agent_core
import bot
import channels
from agent_core.errors import AgentError
from bot.errors import BotError
from channels.errors import ChannelError

# Exception classes that stay outside their package's root, each with its reason.
ALLOWED_OUTSIDE = {
    # A test double's failure (ScriptedProvider got a call it was not scripted for). It is an
    # AssertionError so that it fails the test: as an AgentError the loop and the memory flush
    # would handle it as an ordinary agent failure (``except AgentError``) and hide it.
    "agent_core.testing.UnexpectedModelCall",
}


# Modules that act when imported (the ``python -m bot`` entry point, Alembic's environment,
# the migration scripts): they define no exception classes.
NOT_IMPORTED = ("bot.__main__", "bot.storage.migrations.env", "bot.storage.migrations.versions")


def _modules(package: ModuleType) -> Iterator[ModuleType]:
    yield package
    prefix = package.__name__ + "."
    for info in pkgutil.walk_packages(package.__path__, prefix):
        if not info.name.startswith(NOT_IMPORTED):
            yield importlib.import_module(info.name)


def _classes(owner: object, module: str) -> Iterator[type]:
    """The classes defined in ``module`` reachable from ``owner``, nested ones included."""
    for value in vars(owner).values():
        if inspect.isclass(value) and value.__module__ == module and value is not owner:
            yield value
            yield from _classes(value, module)


def _exceptions(package: ModuleType) -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module in _modules(package):
        for cls in _classes(module, module.__name__):
            if issubclass(cls, BaseException):
                found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return list(found.values())


@pytest.mark.parametrize(
    ("package", "root"),
    [(agent_core, AgentError), (channels, ChannelError), (bot, BotError)],
    ids=["agent_core", "channels", "bot"],
)
def test_every_exception_class_derives_from_its_package_root(
    package: ModuleType, root: type[Exception]
) -> None:
    exceptions = _exceptions(package)
    assert root in exceptions  # the walk reached the errors module
    outside = sorted(
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in exceptions
        if not issubclass(cls, root)
        and f"{cls.__module__}.{cls.__qualname__}" not in ALLOWED_OUTSIDE
    )
    assert outside == [], f"derive these from {root.__module__}.{root.__qualname__}"


def test_the_allow_list_names_classes_that_exist_and_are_still_outside() -> None:
    for name in ALLOWED_OUTSIDE:
        module, _, qualname = name.rpartition(".")
        cls = getattr(importlib.import_module(module), qualname)
        assert issubclass(cls, BaseException)
        assert not issubclass(cls, (AgentError, ChannelError, BotError)), (
            f"drop {name} from the allow-list"
        )


def test_re_parented_classes_keep_their_former_bases() -> None:
    from agent_core.workspace import WorkspaceEscape
    from bot.agents.router import UnknownAgent
    from bot.cluster.pacing import RedisUnavailable

    assert issubclass(WorkspaceEscape, ValueError)  # file tools catch it as a ValueError too
    assert issubclass(UnknownAgent, LookupError)
    assert issubclass(RedisUnavailable, ConnectionError)
