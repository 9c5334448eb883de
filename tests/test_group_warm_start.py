"""``--warm-start NAME`` for a search by group: each group's source, where NAME is a stored
study, an earlier search by group's common name, or neither."""

from pathlib import Path

import pytest

from autotune.group_warm_start import group_sources
from autotune.setup_error import SetupError
from autotune.space.parts import Part

MEASURED = [[Part("qkv.", Path("mm.yaml")), Part("o.", Path("mm.yaml"))],
            [Part("up.", Path("mm.yaml"))]]  # fmt: skip
LABELS = ["qkv", "up"]


def test_a_stored_study_starts_every_group_as_it_starts_a_sweep():
    assert group_sources("old.qkv", {"old.qkv", "old.up"}, MEASURED, LABELS) == [
        ("old.qkv", None), ("old.qkv", None)]  # fmt: skip


def test_an_earlier_search_by_group_starts_each_group_from_its_counterpart():
    assert group_sources("old", {"old.qkv", "old.up"}, MEASURED, LABELS) == [
        ("old.qkv", None), ("old.up", None)]  # fmt: skip


def test_a_group_the_earlier_search_measured_under_another_prefix_starts_from_that():
    """The earlier composed space swept o. on its own (``old.o``): the group qkv., o. starts
    from it."""
    assert group_sources("old", {"old.o", "old.up"}, MEASURED, LABELS)[0] == ("old.o", None)


def test_a_group_without_a_counterpart_starts_from_auto_and_says_so():
    (first, _), (second, note) = group_sources("old", {"old.qkv"}, MEASURED, LABELS)
    assert (first, second) == ("old.qkv", "auto")
    assert note is not None and note.startswith("--warm-start old: its search by group has no ")


@pytest.mark.parametrize("stored", [set(), {"older.qkv", "old.gate"}])
def test_a_name_of_no_study_nor_of_any_groups_counterpart_is_refused(stored):
    with pytest.raises(SetupError, match="no study named 'old' in this storage, nor a search"):
        group_sources("old", stored, MEASURED, LABELS)


@pytest.mark.parametrize("source", ["auto", "off"])
def test_auto_and_off_are_every_groups(source):
    assert group_sources(source, set(), MEASURED, LABELS) == [(source, None), (source, None)]
