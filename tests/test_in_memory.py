"""autotune.in_memory: the in-memory storage's names, spelled once."""

from pathlib import Path

from autotune.in_memory import IN_MEMORY_NAMES, in_memory


def test_the_in_memory_storage_s_names_and_no_file_url_are_in_memory():
    assert [in_memory(url) for url in IN_MEMORY_NAMES] == [True, True]
    assert not any(in_memory(url) for url in ("sqlite:///memory", "journal://memory", None, ""))


def test_no_module_spells_the_in_memory_names_but_their_owner():
    # the names were spelled in seven modules, each its own tuple
    package = Path(__file__).resolve().parents[1] / "autotune"
    spelled = [p.relative_to(package).as_posix() for p in package.rglob("*.py")
               if '("memory", ":memory:")' in p.read_text()]  # fmt: skip
    assert spelled == ["in_memory.py"]
