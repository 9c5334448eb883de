"""The studies of one search by group, as the commands that read the latest study find them:
``autotune best``, ``trials``, ``export`` and ``report`` without ``--study`` took the last
group's study (one GEMM of a decoder's twelve) as if it were the answer; where the latest
study is one group of several, they refuse in one line naming the groups' studies and how to
pick one (:func:`refuse_one_group`).

A search by group (:mod:`autotune.grouped_sweep`) names its studies ``<base>.<label>`` and
records ``base`` in each (``group``, in the study's autotune record); a study stored before
that record is told by its name and its first command: studies ``<base>.*`` made by the same
``autotune tune ... --space ...`` command, each at its own problem.

Example (a shell):
    $ autotune tune matmul --space tiny.yaml --study run --trials 2
    $ autotune best
    error: the latest study, run.up, is one group of a search by group (run.qkv, run.up): ...
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna

#: group studies named in the refusal; the rest counted
NAMED = 4


def refuse_one_group(storage: optuna.storages.BaseStorage, name: str, names: list[str]) -> None:
    """Refuse the latest study ``name`` of ``storage`` (its studies: ``names``) as a reader's
    answer where it is one group of a search by group of several.

    Raises:
        StorageError: naming the groups' studies and how to read one, or all of them.
    """
    from autotune.storage import StorageError

    members = group_members(storage, name, names)
    if len(members) < 2:  # a search whose prefixes are all one measurement: its one study
        return
    listed = ", ".join(members[:NAMED])
    listed += f", ... ({len(members)} in all)" if len(members) > NAMED else ""
    one = shlex.quote(members[0])  # as the shell reads it: a name with a space is one argument
    raise StorageError(f"the latest study, {name}, is one group of a search by group "
                       f"({listed}): name one with --study (e.g. --study {one}), or run the "
                       "search's `autotune tune` command again for every group's winner (it "
                       "answers from the stored studies)")  # fmt: skip


def group_members(storage: optuna.storages.BaseStorage, name: str, names: list[str]) -> list[str]:
    """The studies of ``names`` that belong to the search by group whose study ``name`` is
    (``name`` among them, in the storage's order); none where ``name`` is no group's."""
    records: dict[str, dict[str, Any]] = {}

    def record(study: str) -> dict[str, Any]:
        if study not in records:
            records[study] = _record(storage, study)
        return records[study]

    base = record(name).get("group")
    if base is not None and name.startswith(f"{base}."):
        return [n for n in names if n.startswith(f"{base}.") and record(n).get("group") == base]
    first = _first_command(record(name))
    if base is not None or " --space" not in first:
        return []
    for at, char in enumerate(name):  # older studies, unmarked: the shortest base that fits
        if char != ".":
            continue
        same = [n for n in names if n.startswith(name[: at + 1])
                and _first_command(record(n)) == first]  # fmt: skip
        problems = {json.dumps(record(n).get("problem"), sort_keys=True, default=str)
                    for n in same}  # fmt: skip
        if len(same) > 1 and len(problems) == len(same):  # a group each, at its own problem
            return same
    return []


def _record(storage: optuna.storages.BaseStorage, study: str) -> dict[str, Any]:
    """The autotune record of ``study`` (empty for a study that has none)."""
    from autotune.driver.trial_attrs import stored_info

    attrs = storage.get_study_user_attrs(storage.get_study_id_from_name(study))
    return stored_info(attrs)


def _first_command(record: dict[str, Any]) -> str:
    """The command that made the study (a resume's are stored after it).

    Example:
        >>> _first_command({"command": "autotune tune a; autotune tune b",
        ...                 "commands": ["autotune tune a", "autotune tune b"]})
        'autotune tune a'
        >>> _first_command({})
        ''
    """
    commands = record.get("commands") or [record.get("command") or ""]
    return str(commands[0])
