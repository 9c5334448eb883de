#!/usr/bin/env bash
# There (GPU machine): install the staged wheels into /tmp/site. Source it: `. benchmarks/gpu/setup.sh`
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
cd /tmp  # import autotune from the installed wheel, not the checkout
