#!/usr/bin/env bash
# Here (CPU machine): stage what the offline GPU machine needs into .whl/ (git-ignored):
# optuna and its missing dependencies, plus a wheel of autotune itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -d .whl ] || bash ../shared/gpu/stage-wheels.sh optuna
# torchao: the training step's fp8 precision (float8 linears; its pure-Python path runs with any
# torch the GPU machine has)
ls .whl/torchao-*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 -d .whl torchao==0.16.0
rm -f .whl/autotune-*.whl
python3 -m pip wheel -q --no-deps --no-build-isolation -w .whl . 2>/dev/null || python3 -m pip wheel -q --no-deps -w .whl .
ls .whl
