"""When does a chat make the process load the tokenizer (25 MiB for cl100k, 47 for o200k)?

The context budget counts a request exactly only when a bound computed without the encoding
could cross a threshold that would change something (``agent_core/tokens.py``,
``ContextBudget.fit``). This plays a chat of English text through ``ContextBudget`` as a run
does, turn by turn: ``fit`` before the model call, ``calibrate`` with the usage the provider
reports after it (its words × 1.3), and past ``--compact-after`` messages the history replaced
by a 2 KB summary and its last four messages, as post-run compaction does with the default
settings. It prints the turn at which the encoding loaded, or that it never did.

    python benchmarks/tokenizer_load.py [--user 300] [--answer 1200] [--system 12000]

Compare two commits by running it in a worktree of each (``git worktree add /tmp/old REF``,
then ``PYTHONPATH=/tmp/old python /tmp/old/benchmarks/tokenizer_load.py`` there).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
from pathlib import Path

from agent_core import AgentSettings, Message
from agent_core.bootstrap import Workspaces
from agent_core.context_budget import ContextBudget
from agent_core.store import MemoryStore
from agent_core.testing import ScriptedProvider
from bot.logging_setup import configure_logging

_VOCABULARY = (
    "the of and to in is that it for on with as was at by be this have from or one had not but "
    "what all were when we there can an your which their said if do will each about how up out "
    "them then she many some so these would other into has more her two like him see time could "
    "no make than first been its who now people my made over did down only way find use may "
    "water long little very after words called just where most know reminder tomorrow meeting "
    "schedule project report weather coffee"
)
WORDS = _VOCABULARY.split()


def prose(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    length = 0
    while length < chars:
        words.append(rng.choice(WORDS))
        length += len(words[-1]) + 1
    return " ".join(words)


async def first_loading_turn(args: argparse.Namespace, workspace: Path) -> str:
    rng = random.Random(args.seed)
    settings = AgentSettings(id="main", model=args.model, workspace=workspace)
    store = MemoryStore()
    budget = ContextBudget(
        settings, ScriptedProvider(), store, Workspaces(workspace, settings.id, settings.agent_type)
    )
    system = Message.system(prose(rng, args.system))
    history: list[Message] = []
    for turn in range(1, args.turns + 1):
        history.append(Message.user(prose(rng, args.user)))
        messages = [system, *history]
        await budget.fit(messages, allow_compaction=True)
        billed = int(sum(len(m.content.split()) for m in messages) * 1.3) + 4 * len(messages)
        await budget.calibrate(messages, billed)
        counter = budget.deferred_counter()
        if counter.loaded:
            chars = sum(len(m.content) for m in messages)
            return (
                f"loaded at turn {turn}: {len(messages)} messages, {chars:,} characters, "
                f"{counter.count(messages):,} tokens"
            )
        history.append(Message.assistant(prose(rng, args.answer)))
        if len(history) + 1 > args.compact_after:
            summary = Message.user("[summary of the conversation] " + prose(rng, 2_000))
            history = [summary, Message.assistant("Noted."), *history[-4:]]
    return f"never loaded in {args.turns:,} turns"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--user", type=int, default=300, help="characters per question")
    parser.add_argument("--answer", type=int, default=1_200, help="characters per answer")
    parser.add_argument("--system", type=int, default=12_000, help="system prompt characters")
    parser.add_argument("--turns", type=int, default=2_000)
    parser.add_argument("--compact-after", type=int, default=50, help="messages (the default)")
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    configure_logging("WARNING")
    with tempfile.TemporaryDirectory() as tmp:
        print(asyncio.run(first_loading_turn(args, Path(tmp))))


if __name__ == "__main__":
    main()
