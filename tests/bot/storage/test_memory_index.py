"""bot/storage/memory_index.py: the memory index on each backend (SQLite FTS5; Postgres
full-text when LOOPGATE_TEST_POSTGRES_URL is set): ranking, hostile queries, isolation of
workspaces, re-indexing. Syncing files into it is tested in tests/agent_core/test_memory.py."""

from __future__ import annotations

import asyncio

from agent_core.memory import FileStamp, MemoryDocument, chunk_markdown
from bot.storage import Database
from bot.storage._sql import NUL_REPLACEMENT
from bot.storage.memory_index import SqlMemoryIndex, fts5_query, tsquery

ONE = FileStamp(1, 1)


def _doc(path: str, content: str, stamp: FileStamp = ONE) -> MemoryDocument:
    return MemoryDocument(path, stamp, tuple(chunk_markdown(content)))


def test_fts5_query_quotes_every_term() -> None:
    assert fts5_query(["a", 'b"c']) == '"a" OR "b""c"'
    assert fts5_query(["near"]) == '"near"'  # an FTS5 keyword is only a word


def test_tsquery_ors_the_terms() -> None:
    assert tsquery(["billing", "deploy"]) == "billing | deploy"
    assert tsquery(["one"]) == "one"


async def test_heading_match_outranks_body_match(db: Database) -> None:
    index = SqlMemoryIndex(db)
    await index.reindex(
        "w",
        [
            _doc("memory/a.md", "# Misc\nsomething about gardening and other chores\n"),
            _doc("memory/b.md", "# Gardening\nsomething about plants and other chores\n"),
        ],
    )
    hits = await index.search("w", "gardening", 5)
    assert [h.path for h in hits] == ["memory/b.md", "memory/a.md"]


async def test_hostile_queries_do_not_reach_the_parser(db: Database) -> None:
    index = SqlMemoryIndex(db)
    await index.reindex("w", [_doc("MEMORY.md", "# Tea\ngreen tea\n")])
    for query in ['tea"', "tea OR", "NEAR(tea)", "tea*", "-tea", "heading:tea", "tea & | !"]:
        assert [h.heading for h in await index.search("w", query, 5)] == ["Tea"], query
    assert await index.search("w", "()*", 5) == []


async def test_workspaces_are_isolated(db: Database) -> None:
    index = SqlMemoryIndex(db)
    await index.reindex("alice", [_doc("MEMORY.md", "secret tea recipe")])
    await index.reindex("bob", [_doc("MEMORY.md", "coffee only")])
    assert await index.search("bob", "tea recipe", 5) == []
    assert [h.content for h in await index.search("alice", "tea", 5)] == ["secret tea recipe"]


async def test_reindex_replaces_and_removes(db: Database) -> None:
    index = SqlMemoryIndex(db)
    await index.reindex("w", [_doc("memory/a.md", "old fact about llamas", FileStamp(1, 10))])
    await index.reindex("w", [_doc("memory/a.md", "new fact about alpacas", FileStamp(2, 11))])
    assert await index.search("w", "llamas", 5) == []
    assert len(await index.search("w", "alpacas", 5)) == 1
    assert await index.stamps("w") == {"memory/a.md": FileStamp(2, 11)}
    await index.reindex("w", [], removed=["memory/a.md"])
    assert await index.search("w", "alpacas", 5) == [] and await index.stamps("w") == {}


async def test_concurrent_reindex_of_one_file_keeps_one_copy(db: Database) -> None:
    index = SqlMemoryIndex(db)
    doc = _doc("MEMORY.md", "# A\nzebra\n# B\nzebra crossing\n")
    await asyncio.gather(*(SqlMemoryIndex(db).reindex("w", [doc]) for _ in range(4)))
    assert len(await index.search("w", "zebra", 20)) == 2


async def test_nothing_to_search_for_finds_nothing(db: Database) -> None:
    index = SqlMemoryIndex(db)
    await index.reindex("w", [_doc("MEMORY.md", "# Tea\ngreen tea\n")])
    assert await index.search("w", "", 5) == []
    assert await index.search("w", "tea", 0) == []
    assert await index.search("w", "tea", -1) == []
    assert len(await index.search("w", "tea", 1)) == 1


async def test_a_hit_says_where_it_is(db: Database) -> None:
    index = SqlMemoryIndex(db)
    await index.reindex("w", [_doc("memory/a.md", "intro\n# Tea\ngreen tea\noolong\n")])
    [hit] = await index.search("w", "oolong", 5)
    assert (hit.path, hit.heading, hit.start_line, hit.end_line) == ("memory/a.md", "Tea", 2, 4)
    assert hit.content.startswith("# Tea\ngreen tea\noolong") and hit.score > 0


async def test_the_limit_keeps_the_best_hits(db: Database) -> None:
    index = SqlMemoryIndex(db)
    docs = [_doc(f"memory/{i}.md", "# Note\n" + "kiwi " * i + "other words\n") for i in (1, 5)]
    await index.reindex("w", docs)
    [best] = await index.search("w", "kiwi", 1)
    assert best.path == "memory/5.md"


async def test_nul_characters_are_stored_the_same_on_both_backends(db: Database) -> None:
    index = SqlMemoryIndex(db)
    await index.reindex("w", [_doc("MEMORY.md", "# He\x00ading\nbinary\x00junk mango\n")])
    [hit] = await index.search("w", "mango", 5)
    assert hit.heading == f"He{NUL_REPLACEMENT}ading"
    assert f"binary{NUL_REPLACEMENT}junk" in hit.content


async def test_stamps_are_per_workspace_and_follow_reindexing(db: Database) -> None:
    index = SqlMemoryIndex(db)
    assert await index.stamps("w") == {}
    await index.reindex(
        "w", [_doc("MEMORY.md", "a", FileStamp(5, 1)), _doc("memory/b.md", "b", FileStamp(6, 2))]
    )
    await index.reindex("other", [_doc("MEMORY.md", "c", FileStamp(7, 3))])
    assert await index.stamps("w") == {
        "MEMORY.md": FileStamp(5, 1),
        "memory/b.md": FileStamp(6, 2),
    }
    await index.reindex("w", [_doc("MEMORY.md", "", FileStamp(8, 0))])  # emptied: no chunks
    assert (await index.stamps("w"))["MEMORY.md"] == FileStamp(8, 0)
    assert await index.search("w", "a", 5) == []
    assert await index.stamps("other") == {"MEMORY.md": FileStamp(7, 3)}
