"""Files' stamps and the cache they keep valid (agent_core/file_stamps.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from agent_core.file_stamps import StampedCache, settled, stamp, unchanged


def age(path: Path, seconds: float = 10.0) -> None:
    """Move ``path``'s modification time back: a change the stamp must see, whatever the
    filesystem clock's tick."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - int(seconds * 1e9)))


class TestStamps:
    def test_a_missing_file_is_stamped_as_missing(self, tmp_path: Path) -> None:
        missing = tmp_path / "MEMORY.md"
        stamps = stamp([missing])
        assert stamps == ((str(missing), None),)
        assert unchanged(stamps)
        missing.write_text("now here")
        assert not unchanged(stamps)

    def test_a_rewrite_or_a_removal_is_a_change(self, tmp_path: Path) -> None:
        notes = tmp_path / "USER.md"
        notes.write_text("Name: Ann")
        stamps = stamp([notes])
        assert unchanged(stamps)
        age(notes)  # same size, same inode: only the time differs
        assert not unchanged(stamps)
        stamps = stamp([notes])
        notes.unlink()
        assert not unchanged(stamps)

    def test_a_name_with_a_nul_byte_counts_as_missing(self) -> None:
        assert stamp(["bad\0name"]) == (("bad\0name", None),)

    def test_only_files_unchanged_for_a_while_are_settled(self, tmp_path: Path) -> None:
        notes = tmp_path / "USER.md"
        notes.write_text("x")
        stamps = stamp([notes, tmp_path / "missing.md"])
        now = time.time_ns()
        assert not settled(stamps, now)  # changed just now
        assert settled(stamps, now + 2_000_000_000)
        assert settled(stamps, now, settle_ns=-1_000_000_000)


class TestStampedCache:
    def test_a_value_is_kept_until_one_of_its_files_changes(self, tmp_path: Path) -> None:
        notes = tmp_path / "USER.md"
        notes.write_text("Name: Ann")
        cache: StampedCache[str, str] = StampedCache(10, 1_000, settle_ns=0)
        cache.put("u", "Name: Ann", stamp([notes]), taken_ns=time.time_ns(), size=9)
        assert cache.get("u") == "Name: Ann"
        age(notes)
        assert cache.get("u") is None
        assert len(cache) == 0  # dropped, not checked again

    def test_a_value_read_right_after_a_change_is_not_kept(self, tmp_path: Path) -> None:
        notes = tmp_path / "USER.md"
        notes.write_text("Name: Ann")
        cache: StampedCache[str, str] = StampedCache(10, 1_000)  # trusts stamps after 1 s
        cache.put("u", "Name: Ann", stamp([notes]), taken_ns=time.time_ns(), size=9)
        assert cache.get("u") is None

    def test_the_least_recently_used_go_first(self, tmp_path: Path) -> None:
        cache: StampedCache[str, int] = StampedCache(2, 1_000, settle_ns=0)
        now = time.time_ns()
        cache.put("a", 1, (), taken_ns=now, size=1)
        cache.put("b", 2, (), taken_ns=now, size=1)
        assert cache.get("a") == 1  # "b" is now the least recent
        cache.put("c", 3, (), taken_ns=now, size=1)
        assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)

    def test_the_sizes_are_bounded(self) -> None:
        cache: StampedCache[str, str] = StampedCache(10, 100, settle_ns=0)
        now = time.time_ns()
        cache.put("a", "a", (), taken_ns=now, size=60)
        cache.put("b", "b", (), taken_ns=now, size=60)  # over 100 together: "a" goes
        cache.put("huge", "h", (), taken_ns=now, size=101)  # never kept, and drops nothing
        assert (cache.get("a"), cache.get("b"), cache.get("huge")) == (None, "b", None)
        cache.put("b", "b2", (), taken_ns=now, size=100)  # a replaced value's size is freed
        assert cache.get("b") == "b2"
