"""The fake Zalo Bot API as a fixture (a pytest plugin, see conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.zalo_server import FakeZalo


@pytest.fixture
async def zalo() -> AsyncIterator[FakeZalo]:
    async with FakeZalo() as server:
        yield server
