"""One writer at a time for a file, whatever name it is reached by."""

from __future__ import annotations

import pytest

from autotune.file_lock import WriterBusy, sole_writer


def test_a_link_to_a_file_being_written_is_refused(tmp_path):
    # two records, one through a link, both ran and one overwrote the other's rows
    (tmp_path / "grid.csv").write_text("a,status\n")
    (tmp_path / "link.csv").symlink_to("grid.csv")
    with sole_writer(tmp_path / "grid.csv"):
        busy = pytest.raises(WriterBusy, match="link.csv: another process")
        with busy, sole_writer(tmp_path / "link.csv"):
            pass
        with pytest.raises(WriterBusy), sole_writer(tmp_path / "sub" / ".." / "grid.csv"):
            pass
    with sole_writer(tmp_path / "link.csv"):  # free again
        assert (tmp_path / "grid.csv.lock").exists() and not (tmp_path / "link.csv.lock").exists()
