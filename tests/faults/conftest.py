"""Writes tests/faults/OUTCOMES.md, the table of faults and bad inputs this suite tried and how
each ended, after a run of the whole suite (a run of part of it leaves the file alone), and the
same table into the README between its ``faults-table`` markers."""

from __future__ import annotations

from pathlib import Path

import pytest

TABLE = Path(__file__).with_name("OUTCOMES.md")
README = Path(__file__).parents[2] / "README.md"
START, END = "<!-- faults-table:start -->", "<!-- faults-table:end -->"
_results: dict[str, tuple[str, str]] = {}
_collected: list[str] = []


def pytest_collection_modifyitems(session, config, items) -> None:  # noqa: ANN001 - pytest's
    here = Path(__file__).parent
    for item in items:
        if Path(item.fspath).parent == here:
            _collected.append(item.nodeid)


def pytest_runtest_makereport(item, call):  # noqa: ANN001, ANN201 - pytest's hook
    if call.when != "call" or Path(item.fspath).parent != Path(__file__).parent:
        return
    paragraph = (item.function.__doc__ or "").strip().split("\n\n")[0]
    what = " ".join(line.strip() for line in paragraph.splitlines()) or item.function.__name__
    if call.excinfo is None:
        outcome = "passed"
    elif call.excinfo.errisinstance(pytest.skip.Exception):  # e.g. no PostgreSQL server here
        outcome = f"skipped ({call.excinfo.value.msg})"
    else:
        outcome = "FAILED"
    _results[item.nodeid] = (what, outcome)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus) -> None:  # noqa: ANN001 - pytest's hook
    here = Path(__file__).parent
    modules = {Path(nodeid.split("::")[0]).name for nodeid in _collected}
    every = {p.name for p in here.glob("test_*.py")}
    if not _collected or modules != every or set(_collected) - set(_results):
        return  # part of the suite ran: the table would be incomplete
    lines = ["# Faults and bad inputs tried by tests/faults", "",
             "Written by `tests/faults/conftest.py` after a run of the whole suite.", "",
             "| test | fault or input | outcome |", "| --- | --- | --- |"]  # fmt: skip
    for nodeid in _collected:
        what, outcome = _results[nodeid]
        name = nodeid.split("::", 1)[1]
        lines.append(f"| `{name}` | {what} | {outcome} |")
    TABLE.write_text("\n".join(lines) + "\n")
    text = README.read_text() if README.exists() else ""
    if START in text and END in text:
        head, rest = text.split(START, 1)
        table = "\n".join(lines[4:])  # the table alone, below the README's own heading
        README.write_text(f"{head}{START}\n{table}\n{END}{rest.split(END, 1)[1]}")
