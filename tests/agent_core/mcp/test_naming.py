"""Tool names as the model sees them: prefixed, valid for every provider, unique and stable."""

from __future__ import annotations

import re

from agent_core.mcp._naming import MAX_NAME, namespaced_names

VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_names_are_prefixed_and_valid_for_providers() -> None:
    names = namespaced_names("files", ["echo", "read.file", "a b/c", "x" * 80, "y" * 80])
    assert names["echo"] == "files__echo"
    assert names["read.file"] == "files__read_file"
    assert names["a b/c"] == "files__a_b_c"
    assert all(VALID.match(name) for name in names.values())
    # Truncated names keep a hash of the original: two long names stay apart.
    assert len(names["x" * 80]) == MAX_NAME
    assert names["x" * 80] != names["y" * 80]
    assert names["x" * 80].startswith("files__xxx")


def test_names_that_collide_after_cleaning_stay_unique_and_stable() -> None:
    first = namespaced_names("s", ["a.b", "a_b", "a-b"])
    assert len(set(first.values())) == 3
    assert first["a.b"] == "s__a_b"  # the first one keeps the plain name
    assert namespaced_names("s", ["a.b", "a_b", "a-b"]) == first


def test_a_name_that_fits_exactly_is_kept_and_one_more_character_is_hashed() -> None:
    fits = "t" * (MAX_NAME - len("s__"))
    names = namespaced_names("s", [fits, fits + "u"])
    assert names[fits] == f"s__{fits}"
    longer = names[fits + "u"]
    assert len(longer) == MAX_NAME and longer != f"s__{fits}u"[:MAX_NAME]
    assert re.fullmatch(r"s__t+_[0-9a-f]{8}", longer)


def test_names_do_not_depend_on_the_server_listing_order_of_unrelated_tools() -> None:
    # A hashed name is derived from the tool's own name, so a restart that lists the tools in
    # another order gives the long ones the same names.
    long_a, long_b = "a" * 70, "b" * 70
    first = namespaced_names("srv", [long_a, "echo", long_b])
    second = namespaced_names("srv", [long_b, long_a, "echo"])
    assert first == second


def test_a_name_listed_twice_keeps_its_first_name() -> None:
    names = namespaced_names("s", ["echo", "echo", "e.cho"])
    assert names == {"echo": "s__echo", "e.cho": "s__e_cho"}


def test_the_server_name_is_cleaned_too() -> None:
    assert namespaced_names("my.srv", ["t"]) == {"t": "my_srv__t"}


def test_a_collision_with_a_hashed_name_is_salted_until_unique() -> None:
    # "s__a_b" is taken by "a.b"; "a_b" and "a-b" hash, and a third clash must salt again.
    names = namespaced_names("s", ["a.b", "a_b", "a b", "a/b"])
    assert len(set(names.values())) == 4
    assert all(VALID.match(name) and len(name) <= MAX_NAME for name in names.values())


def test_no_names_give_no_mapping() -> None:
    assert namespaced_names("s", []) == {}
