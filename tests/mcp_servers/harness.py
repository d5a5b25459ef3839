"""Starting the demo MCP server for a test: stdio specs, and HTTP servers on a free port."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agent_core.mcp._servers import ServerSpec

DEMO = Path(__file__).with_name("demo.py")


def stdio_spec(name: str = "demo", *args: str, **fields: Any) -> ServerSpec:
    return ServerSpec(name, command=sys.executable, args=(str(DEMO), *args), **fields)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def wait_for_port(port: int, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            await writer.wait_closed()
            return


class HttpServer:
    """The demo server as a subprocess serving streamable HTTP or SSE on 127.0.0.1."""

    def __init__(self, mode: str, port: int | None = None) -> None:
        self.mode = mode  # "http" or "sse"
        self.port = port or free_port()
        self.process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        path = "/mcp" if self.mode == "http" else "/sse"
        return f"http://127.0.0.1:{self.port}{path}"

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(DEMO),
            f"--{self.mode}",
            str(self.port),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await wait_for_port(self.port)

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        self.process = None


@asynccontextmanager
async def http_server(mode: str) -> AsyncIterator[HttpServer]:
    server = HttpServer(mode)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
