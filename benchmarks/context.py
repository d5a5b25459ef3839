"""Context benchmark: what happens before every model call, for a session of 2,000 messages.

One iteration = load the prompt's context files, build the Full system prompt, run the history
pipeline (limitHistoryTurns + sanitizeHistory) over the whole stored session, then context
pruning (count tokens, soft trim, hard clear, sanitize) against the context window; exactly
what ``Loop._prepare`` and ``ContextBudget.fit`` do, without the provider.

The session is 500 turns of: user question, assistant tool call, tool result, assistant answer.
Every 5th tool result is large (8,000 characters: soft-trimmed), every 50th huge (60,000
characters: hard-cleared), so both pruning passes run. ``history_limit`` is 0 (keep every turn)
so the pipeline sees all 2,000 messages.

- **cold**: a new token counter every iteration (nothing cached: the first run of a session);
- **warm**: one counter reused (its per-message cache hits, as on a session's later runs).

Tokens counted per second is tiktoken over every message's text, with no cache.

    python benchmarks/context.py [--iterations 200] [--messages 2000] [--window 200000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from agent_core import FILE_TOOLS, AgentSettings, Message, RunRequest, ToolCall, ToolRegistry
from agent_core.bootstrap import PromptMode, Workspaces
from agent_core.history import is_valid_sequence, prepare_history
from agent_core.prompt import build_system_prompt
from agent_core.pruning import prune_context
from agent_core.tokens import TokenCounter, get_encoder
from agent_core.workspace import user_workspace
from bot.logging_setup import configure_logging

MODEL = "gpt-4o"
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def prose(n_chars: int, seed: int) -> str:
    out: list[str] = []
    size = 0
    i = seed
    while size < n_chars:
        word = WORDS[i % len(WORDS)] + str(i % 97)
        out.append(word)
        size += len(word) + 1
        i += 7
    return " ".join(out)[:n_chars]


def make_session(n_messages: int) -> list[Message]:
    messages: list[Message] = []
    turn = 0
    while len(messages) < n_messages:
        call = ToolCall(f"call_{turn}", "read_file", f'{{"path": "notes/{turn}.md"}}')
        size = 60_000 if turn % 50 == 49 else 8_000 if turn % 5 == 4 else 400
        messages += [
            Message.user(f"question {turn}: " + prose(200, turn)),
            Message.assistant("", tool_calls=(call,)),
            Message.tool(call, prose(size, turn * 3)),
            Message.assistant(f"answer {turn}: " + prose(300, turn * 5)),
        ]
        turn += 1
    return messages[:n_messages]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--messages", type=int, default=2_000)
    parser.add_argument("--window", type=int, default=200_000)
    args = parser.parse_args()
    configure_logging("warning", "console")

    with tempfile.TemporaryDirectory() as tmp:
        settings = AgentSettings(
            id="main",
            model=MODEL,
            workspace=Path(tmp),
            context_window=args.window,
            history_limit=0,
        )
        workspaces = Workspaces(settings.workspace, settings.id, settings.agent_type)
        workspaces.ensure_user_files("u1")  # seeded AGENTS.md, SOUL.md, ... as on a first chat
        workspace = user_workspace(settings.workspace, "u1")
        tools = ToolRegistry.of(FILE_TOOLS)
        request = RunRequest(session_key="s", message="hi", user_id="u1", channel="telegram")
        session = make_session(args.messages)
        encoder = get_encoder(MODEL)
        if encoder is None:
            raise SystemExit("tiktoken encoding unavailable: the numbers would be estimates")

        def iteration(counter: TokenCounter) -> tuple[int, int]:
            files = workspaces.context_files("u1", PromptMode.FULL)
            system = build_system_prompt(settings, request, tools, workspace, files=files)
            messages = [Message.system(system), *prepare_history(session, settings.history_limit)]
            messages.append(Message.user("one more question"))
            pruned = prune_context(
                messages, budget=settings.context_window, count=counter.count,
                settings=settings.pruning,
            )  # fmt: skip
            assert is_valid_sequence(pruned.messages[1:])
            return pruned.soft_trimmed, pruned.hard_cleared

        def timed(make_counter: bool) -> list[float]:
            shared = TokenCounter(MODEL, encoder=encoder)
            iteration(shared)  # warm-up (and the warm counter's cache)
            samples = []
            for _ in range(args.iterations):
                counter = TokenCounter(MODEL, encoder=encoder) if make_counter else shared
                t0 = time.perf_counter()
                iteration(counter)
                samples.append((time.perf_counter() - t0) * 1000)
            return samples

        trimmed, cleared = iteration(TokenCounter(MODEL, encoder=encoder))
        cold = timed(make_counter=True)
        warm = timed(make_counter=False)

        texts = [m.content for m in session]
        t0 = time.perf_counter()
        tokens = sum(len(encoder.encode(t, disallowed_special=())) for t in texts)
        elapsed = time.perf_counter() - t0

    chars = sum(len(t) for t in texts)
    print(
        f"session: {len(session)} messages, {chars:,} characters, {tokens:,} tokens; window "
        f"{args.window:,}; pruning soft-trimmed {trimmed}, hard-cleared {cleared} tool results"
    )
    for name, samples in (("cold", cold), ("warm", warm)):
        print(f"{name}: prompt + history + pruning p50 {pct(samples, 0.50):.2f} ms, "
              f"p99 {pct(samples, 0.99):.2f} ms, mean {statistics.fmean(samples):.2f} ms "
              f"({len(samples)} iterations)")  # fmt: skip
    print(f"token counting: {tokens / elapsed:,.0f} tokens/s ({MODEL}, "
          f"{chars / elapsed / 1e6:.1f} MB/s of text)")  # fmt: skip


if __name__ == "__main__":
    main()
