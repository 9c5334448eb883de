"""What a server's command runs, as the tuning cache keys it: the server is a program outside
autotune, so a sweep's own source says nothing of it. The key holds the hash of each file the
command names (the program found on PATH, a script or config file it is given) and, for a
Python server (a console script such as ``vllm``, or ``python -m sglang.launch_server``), the
version of the installed distribution it comes from: editing the script or upgrading the
package (``pip install -U vllm``) sweeps again instead of answering from the old sweep.

Example:
    >>> import sys
    >>> parts = server_program_parts(f"{sys.executable} -m optuna --port {{port}}")
    >>> parts["package"].startswith("optuna ")
    True
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from autotune.tuning_cache import file_digest, names_a_file

#: seconds the server's interpreter may take to name its package (an import-heavy
#: environment's metadata scan); past it the package is keyed as unknown
VERSION_TIMEOUT_S = 30.0

# run by the server's own interpreter: the distribution of a console script (``script NAME``)
# or of a module's top-level package (``module NAME``), as "name version"
_FIND_DISTRIBUTION = """
import sys, importlib.metadata as m
kind, name = sys.argv[1], sys.argv[2]
if kind == "module":
    for dist in m.packages_distributions().get(name.partition(".")[0], []):
        print(dist, m.version(dist)); break
else:
    for dist in m.distributions():
        if any(e.group == "console_scripts" and e.name == name for e in dist.entry_points):
            print(dist.metadata["Name"], dist.version); break
"""


def _words(template: str) -> list[str]:
    """The command's words a trial's placeholders do not fill, ``env`` and its variable
    assignments left out (``env HF_HOME=/x vllm serve``: the program is ``vllm``)."""
    try:
        words = shlex.split(template)
    except ValueError:
        return []
    if words and os.path.basename(words[0]) == "env":
        words = words[1:]
        while words and ("=" in words[0] or words[0].startswith("-")):
            words = words[1:]
    return [w for w in words if "{" not in w]


def _program_path(word: str) -> Path | None:
    """The file a command's first word runs: a path as given, else found on PATH."""
    found = word if os.sep in word else shutil.which(word)
    # not resolved: a virtual environment's python is a link, and only run by that path does
    # it see the environment's packages
    return Path(os.path.abspath(found)) if found and os.path.isfile(found) else None


def _shebang_interpreter(path: Path) -> list[str] | None:
    """A Python script's interpreter, from its ``#!`` line (``/usr/bin/env python3`` too);
    None for anything else (a compiled program, a shell script)."""
    try:
        with path.open("rb") as f:
            first = f.readline(4096)
    except OSError:
        return None
    if not first.startswith(b"#!") or b"python" not in first:
        return None
    return first[2:].decode(errors="replace").split()


def _distribution(interpreter: list[str], kind: str, name: str) -> str:
    """``name version`` of the distribution a console script or module comes from, asked of
    the interpreter that runs it (the server's environment may not be autotune's); "unknown"
    where it cannot say."""
    try:
        done = subprocess.run([*interpreter, "-c", _FIND_DISTRIBUTION, kind, name],
                              capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


def command_files(template: str) -> list[str]:
    """The files a server ``template`` names, those that exist: its program (the path found
    on PATH, else as written), and each script or config file among its words
    (``python fake_vllm.py --config=c.yaml``: ``fake_vllm.py``, ``c.yaml``, as written); a word
    a placeholder fills is its trial's.

    Example:
        >>> import sys
        >>> command_files(f"{sys.executable} no-such-file.py --port {{port}}") == [sys.executable]
        True
    """
    words = _words(template)
    if not words:
        return []
    program = _program_path(words[0])
    files = [str(program)] if program is not None else []
    for word in words[1:]:
        value = word.partition("=")[2] if word.startswith("-") else word
        if names_a_file(value) and value not in files:
            files.append(value)
    return files


def server_program_parts(template: str) -> dict[str, str]:
    """The cache key's parts for a server ``template``: ``files`` (word -> hash of each file
    it names) and ``package`` (the Python server's distribution and version), each present
    where found. A program a placeholder names (``{engine} serve``) is left to its value."""
    words = _words(template)
    parts: dict[str, str] = {}
    if not words:
        return parts
    program = _program_path(words[0])
    files = {}
    if program is not None:
        files[words[0]] = file_digest(program)
    for word in words[1:]:
        value = word.partition("=")[2] if word.startswith("-") else word
        if names_a_file(value):
            files[value] = file_digest(Path(value).expanduser())
    if files:
        parts["files"] = ", ".join(f"{w}: {h}" for w, h in sorted(files.items()))
    if program is None:
        return parts
    if program.name.startswith("python") and "-m" in words[1:-1]:
        module = words[words.index("-m", 1) + 1]
        parts["package"] = _distribution([str(program)], "module", module)
    else:
        interpreter = _shebang_interpreter(program)
        if interpreter is not None:
            parts["package"] = _distribution(interpreter, "script", program.name)
    return parts
