"""channels/slack/_recent.py: bounded memories that forget their oldest entries."""

from __future__ import annotations

from channels.slack._recent import RECENT_KEYS, BoundedDict, RecentKeys


class TestBoundedDict:
    def test_forgets_the_least_recently_written_beyond_its_limit(self) -> None:
        d: BoundedDict[str, int] = BoundedDict(limit=2)
        d["a"], d["b"], d["c"] = 1, 2, 3
        assert list(d.items()) == [("b", 2), ("c", 3)]

    def test_writing_again_makes_an_entry_young(self) -> None:
        d: BoundedDict[str, int] = BoundedDict(limit=2)
        d["a"], d["b"] = 1, 2
        d["a"] = 10
        d["c"] = 3
        assert dict(d) == {"a": 10, "c": 3}

    def test_reading_does_not_make_an_entry_young(self) -> None:
        d: BoundedDict[str, int] = BoundedDict(limit=2)
        d["a"], d["b"] = 1, 2
        assert d.get("a") == 1 and d["a"] == 1
        d["c"] = 3
        assert "a" not in d

    def test_default_limit(self) -> None:
        d: BoundedDict[int, int] = BoundedDict()
        assert d.limit == RECENT_KEYS
        for i in range(RECENT_KEYS + 5):
            d[i] = i
        assert len(d) == RECENT_KEYS and next(iter(d)) == 5


class TestRecentKeys:
    def test_a_key_is_new_once(self) -> None:
        keys = RecentKeys()
        assert keys.seen("k") is False
        assert keys.seen("k") is True
        assert keys.seen("other") is False

    def test_forgets_the_oldest_beyond_its_limit(self) -> None:
        keys = RecentKeys(limit=2)
        for k in ("a", "b", "c"):
            assert keys.seen(k) is False
        assert keys.seen("a") is False  # forgotten, so new again
        assert keys.seen("c") is True

    def test_seeing_again_does_not_renew_a_key(self) -> None:
        keys = RecentKeys(limit=2)
        keys.seen("a")
        keys.seen("b")
        assert keys.seen("a") is True
        keys.seen("c")
        assert keys.seen("a") is False  # age is first sight, not last

    def test_forget_makes_a_key_new_again(self) -> None:
        keys = RecentKeys()
        keys.seen("k")
        keys.forget("k")
        keys.forget("never-seen")  # no error
        assert keys.seen("k") is False
