#!/usr/bin/env bash
# Here (CPU machine): stage what the offline GPU machine needs into .whl/ (git-ignored):
# optuna and its missing dependencies, plus a wheel of autotune itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -d .whl ] || bash ../shared/gpu/stage-wheels.sh optuna
rm -f .whl/autotune-*.whl
python3 -m pip wheel -q --no-deps --no-build-isolation -w .whl . 2>/dev/null || python3 -m pip wheel -q --no-deps -w .whl .
ls .whl
