"""Long-term memory tools (spec section 8): ``memory_search`` and ``memory_get``.

Memory is plain markdown in the user's workspace: ``MEMORY.md`` and ``memory/**/*.md`` (the
memory flush writes ``memory/YYYY-MM-DD.md``). ``memory_search`` is a ranked full-text search
over those files, split into heading-sized chunks; the search itself lives behind
:class:`MemoryIndex` (the bot implements it with SQLite FTS5 or Postgres full-text search, see
``bot/storage/memory_index.py``), so this package knows no database.

The index is kept fresh by :class:`MemorySync`: before every search it compares each memory
file's mtime and size with what was indexed and re-indexes only the files that changed (and
drops deleted ones); ``write_file`` to a memory path re-indexes at once (:func:`memory_tools`
wraps it). Files written by other means (the memory flush, an editor) are picked up by the next
search.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import structlog

from agent_core.errors import ToolError
from agent_core.tools.base import Tool, ToolContext
from agent_core.tools.files import WRITE_FILE
from agent_core.workspace import WorkspaceEscape, read_head, resolve_inside

log = structlog.get_logger(__name__)

MEMORY_FILE = "MEMORY.md"
MEMORY_DIR = "memory"
CHUNK_MAX_LINES = 40  # a long section is split into chunks of at most this many lines
CHUNK_MAX_CHARS = 2_000
MAX_QUERY_TERMS = 16
DEFAULT_LIMIT = 5
MAX_LIMIT = 20
HIT_PREVIEW_CHARS = 600
MAX_GET_CHARS = 20_000
MAX_MEMORY_FILE_BYTES = 2_000_000  # larger files are not indexed (logged)
MAX_GET_READ_CHARS = MAX_MEMORY_FILE_BYTES  # memory_get reads no more of a file than this

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_TERM = re.compile(r"[^\W_]+")


# -- data ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileStamp:
    """What decides whether a file must be re-indexed."""

    mtime_ns: int
    size: int


@dataclass(frozen=True, slots=True)
class MemoryChunk:
    chunk_no: int
    heading: str  # the section's heading text ("" before the first heading)
    start_line: int  # 1-based, inclusive
    end_line: int
    content: str


@dataclass(frozen=True, slots=True)
class MemoryDocument:
    path: str  # workspace-relative, POSIX separators
    stamp: FileStamp
    chunks: tuple[MemoryChunk, ...]


@dataclass(frozen=True, slots=True)
class MemoryHit:
    path: str
    heading: str
    start_line: int
    end_line: int
    content: str
    score: float  # higher is better; only comparable within one search


class MemoryIndex(Protocol):
    """A ranked full-text index of memory chunks, partitioned by workspace."""

    async def search(self, workspace_key: str, query: str, limit: int) -> list[MemoryHit]:
        """Best chunks first. ``query`` is free text; implementations match any of its terms
        and rank by relevance (BM25 / ts_rank). An empty or term-less query finds nothing."""
        ...

    async def stamps(self, workspace_key: str) -> dict[str, FileStamp]:
        """The indexed files of the workspace and the stamps they were indexed with."""
        ...

    async def reindex(
        self,
        workspace_key: str,
        files: Sequence[MemoryDocument],
        removed: Sequence[str] = (),
    ) -> None:
        """Replace the chunks of ``files`` and forget ``removed`` paths, atomically."""
        ...


# -- files and chunks ----------------------------------------------------------------------


def is_memory_path(relative: str) -> bool:
    """``MEMORY.md`` or a markdown file under ``memory/`` (workspace-relative POSIX path)."""
    parts = PurePosixPath(relative).parts
    if parts == (MEMORY_FILE,):
        return True
    return len(parts) >= 2 and parts[0] == MEMORY_DIR and parts[-1].lower().endswith(".md")


def workspace_key(workspace: Path) -> str:
    return str(workspace.resolve())


def scan_memory_files(workspace: Path) -> dict[str, FileStamp]:
    """Memory files in the workspace (symlinks leaving it are skipped)."""
    root = workspace.resolve()
    candidates = [root / MEMORY_FILE]
    memory_dir = root / MEMORY_DIR
    if memory_dir.is_dir():
        candidates += sorted(memory_dir.rglob("*.md"))
    found: dict[str, FileStamp] = {}
    for path in candidates:
        try:
            real = path.resolve()
            if root not in real.parents or not real.is_file():
                continue
            st = real.stat()
        except OSError:
            continue
        relative = path.relative_to(root).as_posix()
        if is_memory_path(relative):
            found[relative] = FileStamp(st.st_mtime_ns, st.st_size)
    return found


def chunk_markdown(
    text: str, *, max_lines: int = CHUNK_MAX_LINES, max_chars: int = CHUNK_MAX_CHARS
) -> list[MemoryChunk]:
    """Split at headings (not inside code fences); long sections into pieces of
    ``max_lines`` lines / ``max_chars`` characters. Blank chunks are dropped."""
    lines = text.splitlines()
    sections: list[tuple[str, int, list[str]]] = []  # (heading, first line no, lines)
    heading, start = "", 1
    current: list[str] = []
    in_fence = False
    for no, line in enumerate(lines, start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match and current:
            sections.append((heading, start, current))
            current = []
        if match:
            heading, start = match.group(2).strip(), no
        current.append(line)
    if current:
        sections.append((heading, start, current))

    chunks: list[MemoryChunk] = []
    for heading, first, body in sections:
        piece: list[str] = []
        piece_start = first
        size = 0
        for offset, line in enumerate(body):
            if piece and (len(piece) >= max_lines or size + len(line) > max_chars):
                _add_chunk(chunks, heading, piece_start, piece)
                piece, size, piece_start = [], 0, first + offset
            piece.append(line)
            size += len(line) + 1
        _add_chunk(chunks, heading, piece_start, piece)
    return chunks


def _add_chunk(chunks: list[MemoryChunk], heading: str, start: int, lines: list[str]) -> None:
    """Blank lines around the piece are not part of it (nor of its line range)."""
    first, last = 0, len(lines)
    while first < last and not lines[first].strip():
        first += 1
    while last > first and not lines[last - 1].strip():
        last -= 1
    if first < last:
        content = "\n".join(lines[first:last])
        chunks.append(MemoryChunk(len(chunks), heading, start + first, start + last - 1, content))


def query_terms(query: str) -> list[str]:
    """The words of a free-text query, lower-cased, deduplicated, in order (operators and
    punctuation never reach the database's query parser)."""
    seen: dict[str, None] = {}
    for term in _TERM.findall(query.lower()):
        seen.setdefault(term, None)
    return list(seen)[:MAX_QUERY_TERMS]


def _load_document(root: Path, relative: str, stamp: FileStamp) -> MemoryDocument:
    if stamp.size > MAX_MEMORY_FILE_BYTES:
        log.warning("memory.file_too_large", path=relative, size=stamp.size)
        return MemoryDocument(relative, stamp, ())
    text = (root / relative).read_text(encoding="utf-8", errors="replace")
    return MemoryDocument(relative, stamp, tuple(chunk_markdown(text)))


def _load_documents(workspace: Path, changed: dict[str, FileStamp]) -> list[MemoryDocument]:
    root = workspace.resolve()
    return [_load_document(root, path, stamp) for path, stamp in sorted(changed.items())]


class MemorySync:
    """Brings the index in line with the workspace's memory files (changed files only)."""

    def __init__(self, index: MemoryIndex) -> None:
        self.index = index
        # workspace -> its lock and how many refreshes hold or await it: dropped at 0, or
        # there would be one per user who ever searched, for the life of the process
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    @contextlib.asynccontextmanager
    async def _refreshing(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.setdefault(key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._locks[key]

    async def refresh(self, workspace: Path) -> int:
        """Re-index changed files and drop deleted ones; returns how many files changed."""
        key = workspace_key(workspace)
        async with self._refreshing(key):
            present = await asyncio.to_thread(scan_memory_files, workspace)
            indexed = await self.index.stamps(key)
            changed = {p: s for p, s in present.items() if indexed.get(p) != s}
            removed = sorted(set(indexed) - set(present))
            if not changed and not removed:
                return 0
            docs = await asyncio.to_thread(_load_documents, workspace, changed)
            await self.index.reindex(key, docs, removed)
            log.debug("memory.reindexed", workspace=key, changed=len(docs), removed=len(removed))
            return len(docs) + len(removed)

    async def search(self, workspace: Path, query: str, limit: int) -> list[MemoryHit]:
        await self.refresh(workspace)
        if not query_terms(query):
            return []
        return await self.index.search(workspace_key(workspace), query, limit)


# -- tools ---------------------------------------------------------------------------------


def _format_hits(query: str, hits: Sequence[MemoryHit]) -> str:
    if not hits:
        return f"No memory matches for {query!r}."
    out = [f"{len(hits)} memory match(es) for {query!r}, best first:"]
    for n, hit in enumerate(hits, start=1):
        where = f"{hit.path}:{hit.start_line}-{hit.end_line}"
        title = f" ({hit.heading})" if hit.heading else ""
        text = hit.content
        if len(text) > HIT_PREVIEW_CHARS:
            text = text[:HIT_PREVIEW_CHARS] + " [...]"
        out.append(f"\n{n}. {where}{title} score={hit.score:.3f}\n{text}")
    out.append("\nUse memory_get with a path (and section or from_line) for the full text.")
    return "\n".join(out)


def _int_arg(args: dict[str, Any], name: str, tool: str, default: int | None) -> int | None:
    value = args.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ToolError(tool, f"argument {name!r} must be an integer")
    try:
        return int(value)
    except ValueError as exc:
        raise ToolError(tool, f"argument {name!r} must be an integer") from exc


def _memory_target(ctx: ToolContext, path: str, tool: str) -> tuple[Path, str]:
    try:
        target = resolve_inside(ctx.workspace, path)
    except WorkspaceEscape as exc:
        raise ToolError(tool, f"access denied: {exc}") from exc
    relative = target.relative_to(ctx.workspace.resolve()).as_posix()
    return target, relative


def _section(lines: list[str], wanted: str) -> tuple[int, int] | None:
    """0-based [start, end) of the first section whose heading contains ``wanted``."""
    wanted = wanted.strip().lstrip("#").strip().lower()
    in_fence = False
    start: int | None = None
    level = 0
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if not match:
            continue
        if start is not None and len(match.group(1)) <= level:
            return start, i
        if start is None and wanted in match.group(2).lower():
            start, level = i, len(match.group(1))
    return (start, len(lines)) if start is not None else None


def memory_tools(index: MemoryIndex) -> tuple[Tool, Tool, Tool]:
    """``memory_search``, ``memory_get`` and a ``write_file`` that keeps the index fresh."""
    sync = MemorySync(index)

    async def search(args: dict[str, Any], ctx: ToolContext) -> str:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("memory_search", "argument 'query' (non-empty string) is required")
        limit = _int_arg(args, "limit", "memory_search", DEFAULT_LIMIT) or DEFAULT_LIMIT
        limit = max(1, min(limit, MAX_LIMIT))
        try:
            hits = await sync.search(ctx.workspace, query, limit)
        except ToolError:
            raise
        except Exception as exc:  # the index (database) failed: the model sees a tool error
            log.warning("memory.search_failed", error=str(exc)[:200])
            raise ToolError("memory_search", f"the memory index is unavailable: {exc}") from exc
        return _format_hits(query, hits)

    async def get(args: dict[str, Any], ctx: ToolContext) -> str:
        path = args.get("path")
        if not isinstance(path, str) or not path:
            raise ToolError("memory_get", "argument 'path' (string) is required")
        target, relative = _memory_target(ctx, path, "memory_get")
        if not is_memory_path(relative):
            raise ToolError(
                "memory_get",
                f"{path!r} is not a memory file (MEMORY.md or memory/*.md); use read_file",
            )
        if not target.is_file():
            raise ToolError("memory_get", f"no such memory file: {relative}")
        try:
            head = await asyncio.to_thread(read_head, target, MAX_GET_READ_CHARS)
        except OSError as exc:  # e.g. a link swapped in since the check (O_NOFOLLOW)
            raise ToolError("memory_get", f"access denied: {relative}: {exc.strerror}") from exc
        lines = head.text.splitlines()
        start, end = 0, len(lines)
        section = args.get("section")
        if isinstance(section, str) and section.strip():
            found = _section(lines, section)
            if found is None:
                raise ToolError("memory_get", f"no section {section!r} in {relative}")
            start, end = found
        from_line = _int_arg(args, "from_line", "memory_get", None)
        count = _int_arg(args, "lines", "memory_get", None)
        if from_line is not None:
            start = max(from_line - 1, 0)
        if count is not None and count > 0:
            end = min(start + count, len(lines))
        if lines and start >= len(lines):
            return f"{relative} has only {len(lines)} lines."
        body = "\n".join(lines[start:end])
        if len(body) > MAX_GET_CHARS:
            body = body[:MAX_GET_CHARS] + f"\n[truncated: {len(body)} characters]"
        if head.truncated:
            body += (
                f"\n[the file has {head.size} bytes; only its first {MAX_GET_READ_CHARS} "
                "characters were read]"
            )
        return f"{relative}:{start + 1}-{max(end, start + 1)}\n{body}"

    async def write(args: dict[str, Any], ctx: ToolContext) -> str:
        result = await WRITE_FILE.handler(args, ctx)
        path = args.get("path")
        if isinstance(path, str):
            _, relative = _memory_target(ctx, path, "write_file")
            if is_memory_path(relative):
                try:
                    await sync.refresh(ctx.workspace)
                except Exception as exc:  # the write happened; the next search retries
                    log.warning("memory.reindex_failed", path=relative, error=str(exc)[:200])
        return result

    search_tool = Tool(
        name="memory_search",
        description=(
            "Search your long-term memory (MEMORY.md and memory/*.md) by keywords; returns the "
            "best-matching sections, ranked, with their path and line numbers."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Keywords to look for."},
                "limit": {
                    "type": "integer",
                    "description": f"Most results to return (1-{MAX_LIMIT}, default "
                    f"{DEFAULT_LIMIT}).",
                },
            },
            "required": ["query"],
        },
        handler=search,
        read_only=True,
    )
    get_tool = Tool(
        name="memory_get",
        description=(
            "Read a memory file (MEMORY.md or memory/*.md), whole or one section: give "
            "`section` (heading text) or `from_line` and `lines`."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "e.g. memory/2025-01-31.md"},
                "section": {"type": "string", "description": "Heading text of the section."},
                "from_line": {"type": "integer", "description": "First line (1-based)."},
                "lines": {"type": "integer", "description": "How many lines."},
            },
            "required": ["path"],
        },
        handler=get,
        read_only=True,
    )
    write_tool = Tool(
        name=WRITE_FILE.name,
        description=WRITE_FILE.description,
        parameters=WRITE_FILE.parameters,
        handler=write,
        read_only=WRITE_FILE.read_only,
        kind=WRITE_FILE.kind,
    )
    return search_tool, get_tool, write_tool
