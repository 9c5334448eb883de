"""Device detection: on a machine with no GPU runtime, what torch would say (the CPU, and the
toolchain's versions) is said without importing torch or Triton (about 2 s of CPU, paid by
every ``autotune tune`` process, replays included)."""

import json
import subprocess
import sys

from autotune import device

#: in a fresh interpreter: the device each ``prefer`` describes, the heavy modules that loaded,
#: then what torch's own path says (importing torch), as JSON (in order: keys' order counts)
SCRIPT = """
import json, sys
from autotune.device import detect_device, _detect_with_torch, _no_gpu_runtime
prefers = ["cpu"] + (["auto"] if _no_gpu_runtime() else [])
told = [detect_device(p).as_dict() for p in prefers]
loaded = sorted(m for m in ("torch", "triton") if m in sys.modules)
print(json.dumps([told, loaded, [_detect_with_torch(p, 0).as_dict() for p in prefers]]))
"""


def test_without_a_gpu_runtime_the_device_is_what_torch_says_without_importing_torch():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    told, loaded, by_torch = json.loads(done.stdout)
    assert loaded == []
    assert json.dumps(told) == json.dumps(by_torch)  # the same keys, values and order
    assert all(d["type"] == "cpu" and d["software"]["torch"] for d in told)


def test_a_gpu_runtime_present_leaves_the_question_to_torch(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(device, "_detect_with_torch", lambda *args: asked.append(args) or "torch")
    node = tmp_path / "nvidia0"
    monkeypatch.setattr(device, "_GPU_RUNTIME_PATHS", (str(tmp_path / "nvidia*"),))
    assert device.detect_device.__wrapped__("auto", 0).type == "cpu"  # no such node yet
    node.touch()
    assert device.detect_device.__wrapped__("auto", 0) == "torch"
    assert device.detect_device.__wrapped__("cuda", 1) == "torch"  # asked for: torch's answer
    assert device.detect_device.__wrapped__("cpu", 0).type == "cpu"  # torch is not asked there
    assert asked == [("auto", 0), ("cuda", 1)]
