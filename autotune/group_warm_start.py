"""``--warm-start NAME`` for a search by group (:mod:`autotune.grouped_sweep`): where NAME is
a stored study, every group starts from it, as a sweep does; where it is the common name of
an earlier search by group (its studies ``NAME.<prefix>``, none named NAME), each group
starts from its own counterpart ``NAME.<label>``, and a group that has none (a prefix the
earlier composed space lacked) from the most similar stored sweep (``auto``), with a note.
A name that is neither is refused, in one line.

Example (a shell):
    $ autotune tune matmul --space decoder_gemms.yaml --study v1 --trials 20
    $ autotune tune matmul --space decoder_gemms.yaml --study v2 --warm-start v1
    # group decode1.qkv. starts from v1.decode1.qkv, group decode1.o. from v1.decode1.o, ...

Example (Python):
    >>> parts = [[Part("qkv.", Path("mm.yaml"))], [Part("up.", Path("mm.yaml"))]]
    >>> group_sources("v1", {"v1.qkv"}, parts, ["qkv", "up"])
    [('v1.qkv', None), ('auto', '--warm-start v1: its search by group has no study for up. \
(v1.up); this group starts from the most similar stored sweep (auto)')]
"""

from __future__ import annotations

from pathlib import Path  # noqa: F401 - the example's

from autotune.setup_error import SetupError
from autotune.space.parts import Part


def counterparts(source: str, same: list[Part], own: str) -> list[str]:
    """The studies of a search by group named ``source`` that would have measured the group
    of parts ``same`` (its study label ``own``): ``source.<own>``, then the label and the
    whole prefix of each of its parts (an earlier composed space may have grouped them
    otherwise), in that order, each once.

    Example:
        >>> counterparts("v1", [Part("qkv.", Path("mm.yaml")), Part("o.", Path("mm.yaml"))],
        ...              "qkv")
        ['v1.qkv', 'v1.o', 'v1.qkv.', 'v1.o.']
    """
    from autotune.grouped_sweep import label

    names = [own, *(label(part.prefix) for part in same), *(part.prefix for part in same)]
    return [f"{source}.{name}" for name in dict.fromkeys(names)]


def group_sources(
    source: str, stored: set[str], measured: list[list[Part]], labels: list[str]
) -> list[tuple[str, str | None]]:
    """Each group's ``--warm-start`` (``measured``: the groups' parts; ``labels``: their study
    labels; ``stored``: the storage's study names) and a note to print where it is not the one
    asked for: ``source`` itself where it is ``auto``, ``off`` or a stored study, else each
    group's first counterpart stored (:func:`counterparts`), ``auto`` where it has none.

    Raises:
        SetupError: ``source`` names neither a stored study nor any group's counterpart.
    """
    if source in ("auto", "off") or source in stored:
        return [(source, None) for _ in measured]
    found = [
        next((name for name in counterparts(source, same, own) if name in stored), None)
        for same, own in zip(measured, labels, strict=True)
    ]
    if not any(found):
        earlier = sorted(name for name in stored if name.startswith(f"{source}."))
        shown = ", ".join(earlier[:3]) + (", ..." if len(earlier) > 3 else "")
        which = f" (its studies {shown} are of none of these groups)" if earlier else ""
        raise SetupError(f"--warm-start: no study named {source!r} in this storage, nor a "
                         f"search by group's {source}.<prefix> for these groups{which}; give "
                         "auto, off (lower case), the name of a stored study, or the --study "
                         "of an earlier search by group")  # fmt: skip
    sources: list[tuple[str, str | None]] = []
    for name, same, own in zip(found, measured, labels, strict=True):
        if name is not None:
            sources.append((name, None))
            continue
        sources.append(("auto", f"--warm-start {source}: its search by group has no study for "
                                f"{same[0].prefix} ({source}.{own}); this group starts from the "
                                "most similar stored sweep (auto)"))  # fmt: skip
    return sources
