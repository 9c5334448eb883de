"""``autotune --help`` and each command's ``--help``, rendered as a person reads them: in a
fresh process on an 80-column terminal (the width a pipe gets too)."""

import inspect
import os
import subprocess
import sys

from autotune.cli import app
from autotune.cli_help import summary

#: the frame Typer's rich layout draws around its panels, read as blank
FRAME = str.maketrans("│╭╮╰╯─", "      ")


def rendered_help(*args: str) -> str:
    """What ``autotune ARGS --help`` prints at 80 columns, its panels' frame blanked."""
    env = {**os.environ, "COLUMNS": "80", "TERMINAL_WIDTH": "80", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-P", "-m", "autotune.cli", *args, "--help"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.translate(FRAME)


def listed_commands(text: str) -> dict[str, list[str]]:
    """The commands listing of ``autotune --help``: each command's description, line by line
    as printed (a description wraps onto lines indented to where it starts)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().rstrip(":") == "Commands")
    names = [info.name or info.callback.__name__ for info in app.registered_commands]
    listing: dict[str, list[str]] = {}
    column = 0
    for line in lines[start + 1 :]:
        words = line.split()
        if not words:
            if listing:
                break
            continue
        if words[0] in names and not line[: line.index(words[0])].strip():
            column = line.index(words[1], line.index(words[0]) + len(words[0]))
            listing[words[0]] = [line[column:].rstrip()]
        elif listing and line[:column].strip() == "":  # the last description, wrapped
            listing[list(listing)[-1]].append(line[column:].rstrip())
    return listing


def test_each_command_is_listed_by_its_whole_summary_wrapped_to_the_width_not_its_docstring():
    # tune's line broke where its docstring's lines do: "A --space composed of prefixed" then
    # "includes of the workload's space ..." on the next line, and again after "per distinct"
    listing = listed_commands(rendered_help())
    expected = {info.callback.__name__: summary(inspect.getdoc(info.callback))
                for info in app.registered_commands}  # fmt: skip
    assert sorted(listing) == sorted(expected)
    width = max(len(line) for lines in listing.values() for line in lines)
    for name, lines in listing.items():
        assert " ".join(lines) == expected[name], name  # whole: no "..." where it was cut
        for line, after in zip(lines, lines[1:], strict=False):
            # a line ends only where the next word would not fit on it
            assert len(line) + 1 + len(after.split()[0]) > width, (name, line, after)


def collapsed(text: str) -> str:
    """``text`` with each run of whitespace (a wrapped line's break among them) one space."""
    return " ".join(text.split())


def test_each_option_s_help_and_default_are_printed_whole_at_80_columns():
    # tune's help column was 20 characters wide there: 'tokens_per_s,peak_m…' for the
    # example of --objective, 'ttft_p99_ms=500,tpo…' for --slo's, '[default:
    # sqlite:///autotune.…' for --storage's default
    import typer.main

    group = typer.main.get_command(app)
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        shown = rendered_help(name)
        assert "…" not in shown, name
        text = collapsed(shown)
        for param in command.params:
            said = getattr(param, "help", None)
            if said:
                assert collapsed(said) in text, (name, param.name)
            default = param.default  # a flag's is the flag's name, a list's none
            scalar = isinstance(default, str | int | float) and not getattr(param, "is_flag", 0)
            if getattr(param, "show_default", False) and scalar:
                assert f"default: {default}" in text, (name, param.name)


def test_maximize_s_help_says_what_it_does():
    # it said 'With --replay.' only: with --replay, and doing what?
    text = collapsed(rendered_help("tune"))
    assert "--maximize / --minimize With --replay: whether the --metric column" in text
    assert "is better larger (--maximize) or smaller (--minimize, e.g. a latency)" in text


def test_every_option_s_value_is_labelled_in_capitals_by_its_form_or_type():
    # Typer's labels read '--output <Path>' but '--replay <path>', and '--problem <list[str]>'
    import typer.main

    group = typer.main.get_command(app)
    labels = {}
    for name in group.commands:  # type: ignore[attr-defined]
        options = rendered_help(name).split("Options:", 1)[-1]
        for line in options.splitlines():
            words = line.split()
            if words and words[0].startswith("--") and "/" not in words[:2]:
                labels[words[0]] = words[1] if len(words) > 1 else ""
    assert not [f"{flag} {label}" for flag, label in labels.items() if label.startswith("<")]
    assert {labels[k] for k in ("--output", "--replay", "--space")} == {"PATH"}
    assert (labels["--problem"], labels["--slo"]) == ("KEY=VALUE", "METRIC=LIMIT")
    assert (labels["--trials"], labels["--trial-timeout"], labels["--study"]) == (
        "INTEGER", "NUMBER", "TEXT",
    )  # fmt: skip
