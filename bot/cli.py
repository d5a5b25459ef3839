"""The ``loopgate`` command: serve, chat, check-config."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from bot.config import Config, ConfigFileError, load_config
from bot.logging_setup import configure_logging


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="PATH",
        help="config file (default: ./config.yaml when present, else built-in defaults)",
    )
    parser = argparse.ArgumentParser(prog="loopgate", description=__doc__, parents=[common])
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", parents=[common], help="run the HTTP server and channels")
    serve.add_argument("--host", help="interface to bind (overrides server.host)")
    serve.add_argument("--port", type=int, help="port to bind (overrides server.port and PORT)")
    chat = sub.add_parser("chat", parents=[common], help="chat with the agent in this terminal")
    chat.add_argument("-m", "--message", help="send one message, print the reply and exit")
    sub.add_parser("check-config", parents=[common], help="validate the configuration and exit")
    return parser


def _load(path: Path | None) -> Config:
    try:
        return load_config(path)
    except ConfigFileError as exc:
        print(f"loopgate: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _serve(config: Config) -> int:
    import uvicorn

    from bot.app import Loopgate
    from bot.server import create_app

    app = create_app(Loopgate(config))
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=config.server.host,
            port=config.server.port,
            log_config=None,
            proxy_headers=True,
            lifespan="on",
        )
    )
    print(
        f"Loopgate listening on http://{config.server.host}:{config.server.port}/",
        file=sys.stderr,
    )
    server.run()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    config = _load(args.config)
    if args.command == "check-config":
        print(f"configuration OK ({args.config or 'config.yaml or built-in defaults'})")
        return 0
    quiet = args.command == "chat"
    # The terminal chat is for reading answers, not logs: only warnings go to stderr there.
    configure_logging("warning" if quiet else config.logging.level, config.logging.format)
    if args.command == "serve":
        if args.host:
            config.server.host = args.host
        if args.port is not None:
            config.server.port = args.port
        return _serve(config)
    from bot.terminal import run_chat

    return asyncio.run(run_chat(config, args.message))


if __name__ == "__main__":
    raise SystemExit(main())
