#!/usr/bin/env bash
# A workload of one's own on the GPU, as the README's "Adding a workload" advises: a copy of
# objectives/rmsnorm.py, its kernel and its space, renamed beside each other in a folder outside
# the package, tuned by a relative path (real Triton on the device), tuned again (the tuning
# cache answers), and exported to a triton.Config table. Needs .whl from benchmarks/gpu/stage.sh.
set -u
repo=$PWD
. benchmarks/gpu/setup.sh || exit 1
work=$(mktemp -d) && mkdir $work/norm && cd $work || exit 1
cp $repo/kernels/rmsnorm_triton.py norm/my_norm_kernel.py
cp $repo/search_spaces/rmsnorm.yaml norm/my_norm.yaml
sed -e 's/from autotune.kernels import rmsnorm_triton as kern/import my_norm_kernel as kern/' \
    -e 's/name = "rmsnorm"/name = "my-norm"/' -e 's/space = "rmsnorm.yaml"/space = "my_norm.yaml"/' \
    $repo/objectives/rmsnorm.py > norm/my_norm.py
grep -q "import my_norm_kernel as kern" norm/my_norm.py || { echo "the copy's import did not change"; exit 1; }
for round in 1 2; do
  echo "== round $round"
  start=$SECONDS; python3 -m autotune.cli tune norm/my_norm.py --problem N=8192 \
    --trials ${TRIALS:-24} --storage sqlite:///$work/n.db --output best$round.json 2>&1 \
    | grep -v "^\[I " | tail -${TAIL:-14}; echo "wall $((SECONDS - start)) s"
done
python3 -m autotune.cli export --to triton --storage sqlite:///$work/n.db | head -20
