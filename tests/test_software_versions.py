"""The toolchain's versions read from the packages' sources, without importing them, are the
ones the imported packages give (a GPU-less machine's device check relies on it)."""

import json
import os
import subprocess
import sys

#: a CUDA build's toolchain, laid out as the wheels are: torch.__version__ made from
#: torch/version.py, triton's assigned in its __init__.py, optuna's imported from its version.py
PACKAGES = {
    "torch/__init__.py": "from torch import version\nfrom torch.version import __version__\n",
    "torch/version.py": "from typing import Optional\n__version__ = '2.9.1+cu128'\n"
    "debug = False\ncuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n",
    "triton/__init__.py": '"""doc"""\n__version__ = \'3.5.1\'\nfrom .x import y\n',
    "triton/x.py": "y = 1\n",
    "optuna/__init__.py": "from optuna.version import __version__\n",
    "optuna/version.py": '__version__ = "4.6.0"\n',
}


def test_the_versions_read_from_sources_are_the_imported_ones_cuda_included(tmp_path):
    for name, text in PACKAGES.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    script = ("import json, sys\nfrom autotune.software_versions import declared_versions, "
              "software_versions\nread = declared_versions()\nloaded = 'torch' in sys.modules\n"
              "print(json.dumps([read, loaded, software_versions()]))")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}  # the packages above come first
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=True, env=env)  # fmt: skip
    read, loaded, imported = json.loads(done.stdout)
    assert not loaded
    assert read == {"python": read["python"], "torch": "2.9.1+cu128", "triton": "3.5.1",
                    "optuna": "4.6.0", "cuda": "12.8"}  # fmt: skip
    assert json.dumps(read) == json.dumps(imported)
