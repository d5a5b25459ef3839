"""The deferred token counter (issue 16, memory): the encoding is loaded only when a count could
change a decision, and every decision is the one exact counting takes."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from agent_core.messages import ImagePart, Message, ToolCall
from agent_core.pruning import prune_context
from agent_core.settings import PruningSettings
from agent_core.testing import ScriptedProvider, reply
from agent_core.tokens import (
    MAX_RATIO,
    MIN_RATIO,
    REPLAYED_CALIBRATIONS,
    TokenCounter,
    byte_bound,
    get_encoder,
    word_floor,
)
from tests.agent_core.test_loop import make_loop, request

PIECES = [
    "hello", " world", "\n\n", "    ", "ö", "é", "😀", "漢字", "ﬁ", "<|endoftext|>", "\t",
    "123456", "!!!", "\u200b", "\ud800", "Привет", "🇻🇳", "a" * 40, " " * 17, "def f(x):",
]  # fmt: skip


PRUNING = PruningSettings()


def random_text(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 30)))


def random_messages(rng: random.Random) -> list[Message]:
    out: list[Message] = [Message.system(random_text(rng))]
    for i in range(rng.randint(1, 6)):
        out.append(Message.user(random_text(rng)))
        if rng.random() < 0.3:
            calls = (ToolCall(f"c{i}", random_text(rng) or "t", random_text(rng)),)
            out.append(Message.assistant(random_text(rng), calls))
            out.append(Message.tool(calls[0], random_text(rng)))
        out.append(Message.assistant(random_text(rng)))
    return out


@pytest.mark.parametrize("model", ["gpt-4o", "llama3.1"])
def test_no_text_has_more_tokens_than_utf8_bytes(model: str) -> None:
    encoder = get_encoder(model)
    assert encoder is not None
    rng = random.Random(16)
    for _ in range(2000):
        text = random_text(rng)
        assert len(encoder.encode(text, disallowed_special=())) <= byte_bound(text), repr(text)


# what could put two words in one piece, or one word in none: slashes after newlines (o200k's
# punctuation piece), separators that are whitespace to Python only, marks, contractions
TRICKY = [
    *PIECES, "/", "\n/", ".\n/", "!\r\n//", "\r", "\x1c", "\x1f", ".\x1d.", "\x85", "\xa0",
    "\u3000", "\u2028", "'s", "don't", "I'LL", "e\u0301", "ǅx", "Ⅻ", "٣٤", "1234567", " /a", "a/b",
    "  \n", "\n \n", "-\n", ":/", "http://x.y/z", "  \t", "'", ".", "\u200d",
]  # fmt: skip


@pytest.mark.parametrize("model", ["gpt-4o", "llama3.1"])
def test_no_text_has_fewer_tokens_than_its_word_floor(model: str) -> None:
    encoder = get_encoder(model)
    assert encoder is not None
    rng = random.Random(23)
    # o200k counts ";\n//" as one token: 100 of them are 101 tokens for 200 Python words
    texts = [*TRICKY, ";\n// " * 100, "}\n/ " * 100, ".\n/\n/ " * 100, ". \x1c. " * 100]
    texts += ["".join(rng.choice(TRICKY) for _ in range(rng.randint(1, 40))) for _ in range(4000)]
    for text in texts:
        tokens = len(encoder.encode(text, disallowed_special=()))
        assert word_floor(text) <= tokens, repr(text)
        assert word_floor(text) <= max(1, len(text) // 4)  # the estimate, without an encoder
    # and it is a useful floor: most of the count in English prose
    prose = "The quick brown fox jumps over the lazy dog, then naps in the sun. " * 20
    assert word_floor(prose) >= 0.7 * len(encoder.encode(prose))


def test_the_ceiling_bounds_the_exact_count_through_calibrations() -> None:
    rng = random.Random(4)
    eager, deferred = TokenCounter("gpt-4o"), TokenCounter("gpt-4o", deferred=True)
    for _ in range(REPLAYED_CALIBRATIONS):
        messages = random_messages(rng)
        assert deferred.ceiling(messages) >= eager.count(messages)
        reported = rng.randint(1, 5 * eager.count_raw(messages))  # ratios past both clamps too
        eager.calibrate(messages, reported)
        deferred.calibrate(messages, reported)
        assert deferred.ceiling(messages) >= eager.count(messages)
    assert not deferred.loaded and eager.calibrated
    deferred.load(get_encoder("gpt-4o"))
    # every calibration was kept, so the replay ends on exactly the eager ratio
    assert deferred.ratio == pytest.approx(eager.ratio) and deferred.calibrated
    probe = random_messages(rng)
    assert deferred.count(probe) == eager.count(probe)


@pytest.mark.parametrize("model", ["gpt-4o", "llama3.1"])
def test_after_a_calibration_the_ceiling_stays_within_a_few_times_the_count(model: str) -> None:
    """A report bounds the ratio by the words it covered, not by ``MAX_RATIO``: in English the
    ceiling is ~5 times the count (UTF-8 bytes per token times the words' share of tokens),
    where it was ~14 times, so the encoding loads three times later in a conversation."""
    prose = "The quick brown fox jumps over the lazy dog, then naps in the sun. "
    messages = [Message.system("You are a helpful assistant who answers briefly. " * 40)]
    for i in range(20):
        messages += [Message.user(f"Question {i}: {prose * 3}"), Message.assistant(prose * 2)]
    eager, deferred = TokenCounter(model), TokenCounter(model, deferred=True)
    reported = eager.count_raw(messages) + 300  # the tools' schemas are billed too
    eager.calibrate(messages, reported)
    deferred.calibrate(messages, reported)
    count = eager.count(messages)
    assert count <= deferred.ceiling(messages) <= 6 * count


def test_asking_only_whether_the_ceiling_is_under_a_threshold_gets_the_same_answer() -> None:
    """``below`` lets the cheap bound answer alone (no word split) and changes no answer."""
    rng = random.Random(11)
    counter = TokenCounter("gpt-4o", deferred=True)
    counter.calibrate(random_messages(rng), 500)
    for _ in range(300):
        messages, threshold = random_messages(rng), rng.randint(1, 3_000)
        asked = counter.ceiling(messages, below=threshold)
        assert (asked < threshold) == (counter.ceiling(messages) < threshold)
    fresh = TokenCounter("gpt-4o", deferred=True)
    fresh.calibrate(random_messages(rng), 500)
    assert fresh.ceiling([Message.user("hi")], below=1_000) < 1_000
    assert [kept._ratio_bound for kept in fresh._pending] == [None]  # no words were split


def test_only_the_last_calibrations_are_replayed_and_older_ones_barely_matter() -> None:
    rng = random.Random(7)
    eager, deferred = TokenCounter("gpt-4o"), TokenCounter("gpt-4o", deferred=True)
    for _ in range(3 * REPLAYED_CALIBRATIONS):
        messages = random_messages(rng)
        reported = rng.randint(1, 5 * eager.count_raw(messages))
        eager.calibrate(messages, reported)
        deferred.calibrate(messages, reported)
    deferred.load(get_encoder("gpt-4o"))
    spread = (MAX_RATIO - MIN_RATIO) / 2**REPLAYED_CALIBRATIONS
    assert abs(deferred.ratio - eager.ratio) <= spread


def test_a_kept_calibration_does_not_keep_the_pictures() -> None:
    """Replayed calibrations count images by number, so their bytes are not kept for it."""
    data = bytes(range(256)) * 4096  # a 1 MiB picture
    photo = ImagePart("p.jpg", "inbox/p.jpg", 640, 480, data=data)
    messages = [Message.system("You are a test."), Message.user("look", images=(photo,))]
    eager, deferred = TokenCounter("gpt-4o"), TokenCounter("gpt-4o", deferred=True)
    before = sys.getrefcount(data)
    eager.calibrate(messages, 3000)
    deferred.calibrate(messages, 3000)
    del messages, photo
    assert sys.getrefcount(data) == before - 1  # only the local name holds it now
    deferred.load(get_encoder("gpt-4o"))
    assert deferred.ratio == eager.ratio


def test_a_deferred_counter_does_not_count_until_loaded() -> None:
    counter = TokenCounter("gpt-4o", deferred=True)
    with pytest.raises(RuntimeError, match="load"):
        counter.count([Message.user("hi")])
    counter.load(None)  # no tiktoken: the 4-characters estimate, as an eager counter has
    assert counter.count_text("a" * 400) == 100


def sized(tool_chars: int, turns: int = 3) -> list[Message]:
    call = ToolCall("c1", "read_file", '{"path": "f"}')
    out = [Message.system("You are a test."), Message.user("read f")]
    out += [Message.assistant("", (call,)), Message.tool(call, "x" * tool_chars)]
    for i in range(turns):
        out += [Message.user(f"question {i}"), Message.assistant(f"answer {i}")]
    return [*out, Message.user("and now?")]


async def test_fit_decides_as_exact_counting_does_and_loads_only_when_it_must(
    tmp_path: Path,
) -> None:
    pruning = PruningSettings(keep_last_assistants=1, soft_trim_max_chars=600)
    for tool_chars in (50, 500, 1_000, 1_600, 2_500, 4_000, 9_000):
        messages = sized(tool_chars)
        provider = ScriptedProvider()
        eager_loop, _, _ = make_loop(tmp_path, provider, context_window=3_000, pruning=pruning)
        deferred_loop, _, _ = make_loop(tmp_path, provider, context_window=3_000, pruning=pruning)
        await eager_loop.context.counter()  # loaded up front: the exact decisions
        eager = await eager_loop.context.fit(list(messages), allow_compaction=False)
        fit = await deferred_loop.context.fit(list(messages), allow_compaction=False)
        assert fit.messages == eager.messages, tool_chars
        assert (fit.pruned, fit.exceeded) == (eager.pruned, eager.exceeded), tool_chars
        loaded = deferred_loop.context.deferred_counter().loaded
        if fit.tokens is None:  # not counted: nothing could have happened
            assert not loaded and eager.pruned == 0 and not eager.exceeded
        else:
            assert loaded and fit.tokens == eager.tokens
    # the sizes above cover both sides: a small request stays deferred, a big one prunes
    small = await make_loop(tmp_path, ScriptedProvider(), context_window=3_000)[0].context.fit(
        sized(50), allow_compaction=False
    )
    assert small.tokens is None
    big_loop = make_loop(tmp_path, ScriptedProvider(), context_window=3_000, pruning=pruning)[0]
    big = await big_loop.context.fit(sized(9_000), allow_compaction=False)
    assert big.pruned == 1 and big_loop.context.deferred_counter().loaded


@pytest.mark.parametrize("compaction", [True, False])
async def test_a_conversation_pruning_cannot_change_waits_for_compactions_threshold(
    tmp_path: Path, compaction: bool
) -> None:
    # Pruning shortens long tool results only. A chat past its first threshold (0.3 of the
    # window) but with no such result stays uncounted until compaction's (0.75) or the budget's.
    loop, _, _ = make_loop(tmp_path, ScriptedProvider(), context_window=3_000)
    context, exact = loop.context, TokenCounter("m")
    call = ToolCall("c1", "read_file", '{"path": "f"}')
    messages = [Message.system("You are a test."), Message.user("read f")]
    messages += [Message.assistant("", (call,)), Message.tool(call, "x" * 500)]  # too short
    for i in range(3):  # "x1 " is about 1.5 bytes a token: the ceiling stays near the count
        messages += [Message.user(f"q{i} " + "x1 " * 80), Message.assistant("x1 " * 80)]
    lowest, unprunable = context._thresholds(compaction)
    assert lowest == 900 <= exact.count(messages)  # exact counting would run the pruning pass
    assert context.deferred_counter().ceiling(messages) < unprunable
    # ... which changes nothing here, so neither does skipping it
    unchanged = prune_context(messages, budget=3_000, count=exact.count, settings=PRUNING)
    assert unchanged.messages == messages and not unchanged.changed
    fit = await context.fit(list(messages), allow_compaction=compaction)
    assert fit.messages == messages and fit.tokens is None
    assert (fit.pruned, fit.compacted, fit.exceeded) == (0, False, False)
    assert not context.deferred_counter().loaded
    # the same chat with one long tool result: now the count decides, and the result is trimmed
    messages[3] = Message.tool(call, "x" * 7_000)
    fit = await context.fit(list(messages), allow_compaction=compaction)
    assert context.deferred_counter().loaded and fit.tokens is not None and fit.pruned == 1


async def test_a_short_conversation_never_loads_the_encoding(tmp_path: Path) -> None:
    provider = ScriptedProvider(reply("one"), reply("two"))
    loop, _, _ = make_loop(tmp_path, provider)
    assert (await loop.run(request("hi"))).content == "one"
    assert (await loop.run(request("again"))).content == "two"
    counter = loop.context.deferred_counter()
    assert not counter.loaded
    # the provider's reports were kept for when it is loaded
    assert counter._pending and all(kept.reported > 0 for kept in counter._pending)
