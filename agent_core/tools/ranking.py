"""Ranking named, described things (MCP tools, skills) against a short query.

The search tools (``mcp_tool_search``, ``skill_search``) see at most a few hundred entries, so a
plain BM25 over the name (weighted up) and the description beats an index or an embedding model:
nothing to load, nothing to keep in memory, and the same query always gives the same order.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

_WORD = re.compile(r"[a-z0-9]+")
NAME_WEIGHT = 3  # a query word in the name counts as much as three in the description
_K1, _B = 1.2, 0.75


def words(text: str) -> list[str]:
    """Lower-case words; ``snake_case``, ``kebab-case`` and ``camelCase`` split into parts."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    return _WORD.findall(spaced.lower())


@dataclass(frozen=True, slots=True)
class Entry(Generic[T]):
    item: T
    name: str
    description: str


@dataclass(frozen=True, slots=True)
class Hit(Generic[T]):
    item: T
    score: float


def rank(query: str, entries: Sequence[Entry[T]], *, limit: int = 10) -> list[Hit[T]]:
    """Entries matching at least one query word, best first (ties keep the input order)."""
    terms = set(words(query))
    if not terms or not entries:
        return []
    docs = [Counter(words(e.name) * NAME_WEIGHT + words(e.description)) for e in entries]
    avg_len = sum(sum(d.values()) for d in docs) / len(docs) or 1.0
    frequency = Counter(term for d in docs for term in terms if term in d)
    hits: list[Hit[T]] = []
    for entry, doc in zip(entries, docs, strict=True):
        length = sum(doc.values())
        score = 0.0
        for term in terms:
            tf = doc.get(term, 0)
            if not tf:
                continue
            idf = math.log(1 + (len(docs) - frequency[term] + 0.5) / (frequency[term] + 0.5))
            score += idf * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * length / avg_len))
        if query.strip().lower() == entry.name.lower():
            score += 100.0  # the exact name always comes first
        if score > 0:
            hits.append(Hit(entry.item, score))
    hits.sort(key=lambda h: -h.score)  # stable: ties keep the input order
    return hits[: max(0, limit)]
