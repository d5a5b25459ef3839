"""Files' stamps and the cache they keep valid (agent_core/file_stamps.py)."""

from __future__ import annotations

import os
from pathlib import Path

from agent_core.file_stamps import Stamp, StampedCache, digest, stamp, trusted


def age(path: Path, seconds: float = 10.0) -> None:
    """Move ``path``'s modification time back: a change the stamp must see, whatever the
    filesystem clock's tick."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - int(seconds * 1e9)))


def unchanged(paths: list[str], taken: Stamp) -> bool:
    return digest(paths) == taken.digest


class TestStamps:
    def test_a_missing_file_that_appears_is_a_change(self, tmp_path: Path) -> None:
        missing = str(tmp_path / "MEMORY.md")
        taken = stamp([missing])
        assert unchanged([missing], taken) and taken.changed_ns == 0
        Path(missing).write_text("now here")
        assert not unchanged([missing], taken)

    def test_a_rewrite_or_a_removal_is_a_change(self, tmp_path: Path) -> None:
        notes = tmp_path / "USER.md"
        notes.write_text("Name: Ann")
        paths = [str(notes), str(tmp_path / "missing.md")]
        taken = stamp(paths)
        assert unchanged(paths, taken)
        age(notes)  # same size, same inode: only the time differs
        assert not unchanged(paths, taken)
        taken = stamp(paths)
        notes.unlink()
        assert not unchanged(paths, taken)

    def test_a_name_with_a_nul_byte_counts_as_missing(self) -> None:
        assert stamp(["bad\0name"]).digest == stamp(["other\0name"]).digest

    def test_only_files_unchanged_for_a_while_are_settled(self, tmp_path: Path) -> None:
        notes = tmp_path / "USER.md"
        notes.write_text("x")
        taken = stamp([str(notes), str(tmp_path / "missing.md")])
        assert taken.changed_ns == notes.stat().st_ctime_ns
        assert not taken.settled(settle_ns=60_000_000_000)
        assert taken.settled(settle_ns=0)
        assert stamp([str(tmp_path / "missing.md")]).settled()

    def test_a_coarse_filesystem_is_trusted_later(self) -> None:
        now = 1_796_000_000_123_456_789
        fine = Stamp(1, now - 30_000_000 - 123, now)  # 30 ms before: past two 100 Hz ticks
        coarse = Stamp(1, now - 1_000_000_000, now, coarse=True)  # whole seconds
        assert fine.settled() and not Stamp(1, now - 5_000_000, now).settled()
        assert not coarse.settled() and Stamp(1, now - 3_000_000_000, now, coarse=True).settled()
        assert stamp(["/"]).coarse == (os.stat("/").st_ctime_ns % 1_000_000 == 0)
        assert trusted(now - 30_000_000, now) and not trusted(now - 5_000_000, now)
        assert not trusted(now - now % 1_000_000_000 - 1_000_000_000, now)  # whole seconds


class TestStampedCache:
    def test_a_value_is_kept_until_one_of_its_files_changes(self, tmp_path: Path) -> None:
        notes = tmp_path / "USER.md"
        notes.write_text("Name: Ann")
        cache: StampedCache[str, str] = StampedCache(10, 1_000, settle_ns=0)
        cache.put("u", "Name: Ann", stamp([str(notes)]), size=9)
        assert cache.get("u", lambda _: [str(notes)]) == "Name: Ann"
        age(notes)
        assert cache.get("u", lambda _: [str(notes)]) is None
        assert len(cache) == 0  # dropped, not checked again

    def test_a_value_read_right_after_a_change_is_not_kept(self, tmp_path: Path) -> None:
        notes = tmp_path / "USER.md"
        notes.write_text("Name: Ann")
        cache: StampedCache[str, str] = StampedCache(10, 1_000, settle_ns=60_000_000_000)
        cache.put("u", "Name: Ann", stamp([str(notes)]), size=9)
        assert len(cache) == 0

    def test_the_least_recently_used_go_first(self) -> None:
        cache: StampedCache[str, int] = StampedCache(2, 1_000, settle_ns=0)
        cache.put("a", 1, stamp([]), size=1)
        cache.put("b", 2, stamp([]), size=1)
        assert cache.get("a", lambda _: []) == 1  # "b" is now the least recent
        cache.put("c", 3, stamp([]), size=1)
        assert [cache.get(key, lambda _: []) for key in "abc"] == [1, None, 3]

    def test_the_sizes_are_bounded(self) -> None:
        cache: StampedCache[str, str] = StampedCache(10, 100, settle_ns=0)
        cache.put("a", "a", stamp([]), size=60)
        cache.put("b", "b", stamp([]), size=60)  # over 100 together: "a" goes
        cache.put("huge", "h", stamp([]), size=101)  # never kept, and drops nothing
        assert [cache.get(key, lambda _: []) for key in ("a", "b", "huge")] == [None, "b", None]
        cache.put("b", "b2", stamp([]), size=100)  # a replaced value's size is freed
        assert cache.get("b", lambda _: []) == "b2"
