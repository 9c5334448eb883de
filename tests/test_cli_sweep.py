"""The end of ``autotune tune`` (:mod:`autotune.cli_sweep`): its sweep, finish and best config,
run as a command."""

import subprocess
import sys
from pathlib import Path

#: a workload whose figure ``v`` is its config's x, and whose third measurement (the finish's
#: first: the sweep runs two) presses Ctrl-C where CPython drops its KeyboardInterrupt
PRESSED_IN_THE_FINISH = """import sys
from pathlib import Path

from autotune.measurement import Measurement
from autotune.objectives.base import Objective

sys.path.insert(0, str(Path(__file__).parent))
from dropped_ctrl_c import press_ctrl_c_in_a_gc_callback


class Pressed(Objective):
    name = "pressed"
    space = "pressed.yaml"
    directions = {"v": "maximize"}

    def evaluate(self, config, report=None):
        calls = Path(__file__).parent / "calls"
        with calls.open("a") as f:
            f.write(".")
        if len(calls.read_text()) == 3:
            press_ctrl_c_in_a_gc_callback()
        return Measurement(values={"v": float(config["x"])})


OBJECTIVE = Pressed
"""


def test_a_ctrl_c_in_the_finish_that_cpython_dropped_still_ends_the_command_130(
    tmp_path: Path, dropped_ctrl_c
):
    """Ctrl-C in the finish that landed in a garbage collector's callback ('Exception ignored
    in: ...') was lost: the finish ran on, the best config was printed and the command exited
    0; it now ends as an interrupt in the finish does: 'interrupted', the resume, exit 130."""
    (tmp_path / "pressed.py").write_text(PRESSED_IN_THE_FINISH)
    (tmp_path / "pressed.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 6}\n")
    result = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "./pressed.py", "--trials", "2",
         "--executor", "inline", "--storage", f"sqlite:///{tmp_path / 's.db'}"],
        capture_output=True, text=True, cwd=tmp_path, timeout=240,
    )  # fmt: skip
    assert "Exception ignored in" in result.stderr  # (the press was dropped, as in the wild)
    assert result.returncode == 130, result.stderr
    said = result.stderr.splitlines()
    assert said[-2] == "interrupted; finished trials are stored", result.stderr
    assert said[-1].startswith("resume study pressed-"), result.stderr
    assert len((tmp_path / "calls").read_text()) == 3  # the finish measured no more
    assert result.stdout == ""  # no best config printed
