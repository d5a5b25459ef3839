"""The fakes' server stops its own way (tests/fakes/loopback.py): at once, yet still gracefully."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from tests.fakes.loopback import LoopbackServer


async def test_a_stop_lets_the_answer_under_way_finish_then_refuses_new_connections() -> None:
    started = asyncio.Event()

    async def slow(request: Request) -> PlainTextResponse:
        started.set()
        await asyncio.sleep(0.3)
        return PlainTextResponse("done")

    server = LoopbackServer(Starlette(routes=[Route("/slow", slow)]), name="slow")
    port = await server.start()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        answer = asyncio.create_task(client.get("/slow"))
        await started.wait()
        await server.stop()  # returns once the answer under way went out
        assert answer.done()
        response = await answer
        assert (response.status_code, response.text) == (200, "done")
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{port}/slow")
