"""BM25 ranking of named, described entries (MCP tools, skills)."""

from __future__ import annotations

import pytest

from agent_core.tools.ranking import Entry, rank, words


class TestWords:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("read_file", ["read", "file"]),
            ("list-files", ["list", "files"]),
            ("getWeatherForecast", ["get", "weather", "forecast"]),
            ("Send an E-mail, v2!", ["send", "an", "e", "mail", "v2"]),
            ("", []),
        ],
    )
    def test_splits_and_lowercases(self, text: str, expected: list[str]) -> None:
        assert words(text) == expected


ENTRIES = [
    Entry("weather", "get_weather", "Current conditions and forecast for a city"),
    Entry("calendar", "calendar_events", "List the events in your calendar"),
    Entry("mail", "send_mail", "Send an email; mentions the weather in the signature"),
    Entry("files", "list_files", "List files in a folder"),
]


def items(query: str, **kw: int) -> list[str]:
    return [hit.item for hit in rank(query, ENTRIES, **kw)]


def test_only_matching_entries_are_returned() -> None:
    assert items("calendar") == ["calendar"]
    assert items("spaceship") == []


def test_a_word_in_the_name_beats_one_in_the_description() -> None:
    assert items("weather") == ["weather", "mail"]


def test_more_matching_words_rank_higher() -> None:
    assert items("list files")[0] == "files"
    assert set(items("list files")) == {"files", "calendar"}


def test_exact_name_comes_first() -> None:
    entries = [
        Entry("a", "mail tools", "mail mail mail mail"),
        Entry("b", "mail", "something else entirely"),
    ]
    assert [hit.item for hit in rank("Mail", entries)] == ["b", "a"]


def test_limit() -> None:
    assert len(rank("list", ENTRIES, limit=1)) == 1
    assert rank("list", ENTRIES, limit=0) == []
    assert rank("list", ENTRIES, limit=-3) == []


def test_scores_are_descending_and_positive() -> None:
    hits = rank("list weather events", ENTRIES)
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)


def test_ties_keep_the_input_order() -> None:
    entries = [Entry(i, f"tool{i}", "shared words here") for i in range(5)]
    assert [hit.item for hit in rank("shared", entries)] == [0, 1, 2, 3, 4]


def test_same_query_same_order() -> None:
    assert rank("list the weather", ENTRIES) == rank("weather the list", ENTRIES)


@pytest.mark.parametrize("query", ["", "   ", "!!!"])
def test_a_query_without_words_finds_nothing(query: str) -> None:
    assert rank(query, ENTRIES) == []


def test_no_entries() -> None:
    assert rank("weather", []) == []
