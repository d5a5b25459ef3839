"""The ``loopgate`` command: serve, chat, check-config, inbox, cron, usage, traces, agents,
evolution, links, teams, tasks, mcp, pairing."""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from bot.cli import agents as agents_cli
from bot.cli import cron as cron_cli
from bot.cli import evolution as evolution_cli
from bot.cli import inbox as inbox_cli
from bot.cli import links as links_cli
from bot.cli import mcp as mcp_cli
from bot.cli import teams as teams_cli
from bot.cli import usage as usage_cli
from bot.cli.database import with_database
from bot.cli.start_signals import StartSignals
from bot.config import Config, ConfigFileError, load_config
from bot.logging_setup import configure_logging
from bot.storage import Database


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
    prompt = sub.add_parser("prompt", parents=[common], help="print an agent's system prompt")
    prompt.add_argument("--agent", default=None, help="agent id (default: agents.default)")
    prompt.add_argument("--channel", default="telegram")
    prompt.add_argument("--chat-type", choices=["direct", "group"], default="direct")
    prompt.add_argument("--user", default="preview-user", help="user id whose workspace is used")
    prompt.add_argument("--mode", choices=["full", "minimal"], default="full")
    traces = sub.add_parser("traces", parents=[common], help="print recent run traces as trees")
    traces.add_argument("--session", metavar="KEY", help="only traces of this session key")
    traces.add_argument("--last", type=int, default=10, metavar="N", help="how many (default 10)")
    pairing = sub.add_parser("pairing", parents=[common], help="DM pairing (dm_policy: pairing)")
    pairing_sub = pairing.add_subparsers(dest="pairing_command", required=True)
    pairing_sub.add_parser("list", parents=[common], help="show pending pairing codes")
    approve = pairing_sub.add_parser("approve", parents=[common], help="approve a pairing code")
    approve.add_argument("code", help="the 8-character code the user received")
    agents_cli.add_parser(sub, common)
    cron_cli.add_parser(sub, common)
    evolution_cli.add_parser(sub, common)
    inbox_cli.add_parser(sub, common)
    links_cli.add_parser(sub, common)
    mcp_cli.add_parser(sub, common)
    teams_cli.add_parser(sub, common)
    usage_cli.add_parser(sub, common)
    return parser


def _load(path: Path | None) -> Config:
    try:
        return load_config(path)
    except ConfigFileError as exc:
        print(f"loopgate: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _serve(config: Config) -> int:
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Started as a shell's background command. uvicorn takes SIGINT all the same (a
        # `kill -INT` drains and stops) and re-raises it at the end, which an ignored SIGINT
        # would swallow: the exit would say 0 instead of "interrupted".
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _serve_on_loop(config)
    except KeyboardInterrupt:
        # Ctrl-C drained and closed like SIGTERM; uvicorn then re-raises the SIGINT it caught,
        # which would end in a traceback: end as a shell expects a Ctrl-C to end instead.
        return 130


def _serve_on_loop(config: Config) -> int:
    choice = config.server.event_loop
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError:
            if choice == "uvloop":
                print(
                    "loopgate: server.event_loop is uvloop, which is not installed", file=sys.stderr
                )
                return 2
        else:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(_serve_async(config))
    return asyncio.run(_serve_async(config))


def freeze_startup_objects() -> int:
    """Move what start-up made (modules, tables, config: ~1M objects) out of the collector's
    sight; returns how many. A full collection otherwise walks all of them and stalls the
    event loop for 50-90 ms on 2 cores, every time long-lived objects grow by a quarter:
    measured as the worst reply latency (docs/performance.md)."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


async def _serve_async(config: Config) -> int:
    from bot.app import Loopgate
    from bot.http.draining import DrainingServer
    from bot.http.server import create_app
    from bot.http.uvicorn_config import server_config
    from bot.storage import StorageError
    from channels import ChannelError

    loopgate = Loopgate(config, migrate_apart=True)  # Alembic stays out of the server
    with StartSignals() as signals:
        # Started here rather than in the ASGI lifespan: a refused token or an unreachable
        # database becomes one clear line and exit code 1, not a uvicorn traceback.
        try:
            if not await signals.run(loopgate.start()):
                return signals.exit_code  # cancelled: Loopgate.start closed what it opened
        except (ChannelError, StorageError) as exc:
            print(f"loopgate: cannot start: {exc}", file=sys.stderr)
            return 1
        # The app's lifespan closes loopgate: uvicorn re-raises SIGTERM once it has shut down,
        # so code after serve() would never run on a PaaS stop.
        try:
            freeze_startup_objects()
            server = DrainingServer(
                server_config(create_app(loopgate, started=True), config),
                loopgate,
            )
            signals.release()  # uvicorn takes them as it begins to serve
            if signals.received is not None:  # between the start and the hand-over
                return signals.exit_code
            print(
                f"Loopgate listening on http://{config.server.host}:{config.server.port}/",
                file=sys.stderr,
            )
            await server.serve()
        finally:
            await loopgate.aclose()
    return 0


async def _pairing(config: Config, command: str, code: str) -> int:
    from bot.pipeline.access import PairingStore

    async def act(db: Database) -> int:
        store = PairingStore(db)
        if command == "list":
            pending = await store.pending()
            for request in pending:
                expires = request.expires_at.strftime("%H:%M UTC")
                print(
                    f"{request.code}  {request.channel}  {request.user_id}  {request.name}  "
                    f"(expires {expires})"
                )
            if not pending:
                print("no pending pairing requests")
            return 0
        approved = await store.approve(code)
        if approved is None:
            print(f"loopgate: no pending pairing code {code.upper()!r} (expired?)", file=sys.stderr)
            return 1
        print(f"approved {approved.channel} user {approved.user_id} {approved.name}".rstrip())
        return 0

    return await with_database(config, act)


async def _exec_status(config: Config) -> str:
    """One line on ``tools.exec``: off, offered, or not offered and why (the probe is real)."""
    from bot.agents.exec_setup import prepare_exec

    configure_logging("error", config.logging.format)
    runtime = await prepare_exec(config)
    if runtime is None:
        return "tools.exec: off"
    sandbox = config.tools.exec.sandbox
    if not runtime.available:
        return f"tools.exec: NOT offered: sandbox {sandbox!r} unavailable: {runtime.unavailable}"
    if sandbox == "none":
        return "tools.exec: offered WITHOUT a sandbox (sandbox: none): commands run on the host"
    network = "on" if config.tools.exec.network else "off"
    return f"tools.exec: offered, sandbox {sandbox!r} works here (network {network})"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    config = _load(args.config)
    if args.command == "check-config":
        print(f"configuration OK ({args.config or 'config.yaml or built-in defaults'})")
        print(asyncio.run(_exec_status(config)))
        return 0
    if args.command == "prompt":
        from bot.agents.exec_setup import prepare_exec
        from bot.cli.prompt import render_prompt

        agent = args.agent or config.agents.default
        configure_logging("warning", config.logging.format)  # stderr: why exec is missing
        print(
            render_prompt(
                config,
                agent,
                channel=args.channel,
                chat_type=args.chat_type,
                user_id=args.user,
                mode=args.mode,
                exec_runtime=asyncio.run(prepare_exec(config)),
            )
        )
        return 0
    if args.command == "pairing":
        configure_logging("warning", config.logging.format)
        return asyncio.run(_pairing(config, args.pairing_command, getattr(args, "code", "")))
    if args.command == "agents":
        configure_logging("warning", config.logging.format)
        return agents_cli.run(config, args)
    if args.command == "evolution":
        configure_logging("warning", config.logging.format)
        return evolution_cli.run(config, args)
    if args.command == "links":
        configure_logging("warning", config.logging.format)
        return links_cli.run(config, args)
    if args.command == "mcp":
        configure_logging("warning", config.logging.format)
        return mcp_cli.run(config, args)
    if args.command in ("teams", "tasks"):
        configure_logging("warning", config.logging.format)
        return teams_cli.run(config, args)
    if args.command == "inbox":
        configure_logging("warning", config.logging.format)
        return asyncio.run(inbox_cli.run(config, args))
    if args.command == "cron":
        configure_logging("warning", config.logging.format)
        return asyncio.run(cron_cli.run(config, args))
    if args.command == "usage":
        configure_logging("warning", config.logging.format)
        return asyncio.run(usage_cli.run(config, args))
    if args.command == "traces":
        from bot.cli.traces import print_traces

        configure_logging("warning", config.logging.format)
        return asyncio.run(print_traces(config, session=args.session, last=max(1, args.last)))
    quiet = args.command == "chat"
    # The terminal chat is for reading answers, not logs: only warnings go to stderr there.
    configure_logging("warning" if quiet else config.logging.level, config.logging.format)
    if args.command == "serve":
        if args.host:
            config.server.host = args.host
        if args.port is not None:
            config.server.port = args.port
        return _serve(config)
    from bot.cli.chat import run_chat

    return asyncio.run(run_chat(config, args.message))


if __name__ == "__main__":
    raise SystemExit(main())
