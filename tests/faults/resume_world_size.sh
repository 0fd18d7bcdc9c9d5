#!/usr/bin/env bash
# Resume on another world size: 16 mlp steps on 2 ranks (batch 32 each, global 64), checkpoint at
# step 8; resumed from it on 1 rank and on 4 ranks with --global-batch-size 64, each step takes the
# same 64 samples (the sampler deals the (seed, epoch) permutation round-robin, so global batch b is
# entries [64b, 64b+64) on any world size), so the final weights must match the uninterrupted 2-rank
# run's to fp32 rounding: max |difference| <= 1e-6 (weights are O(0.05); sums over a different
# number of ranks round differently). On 3 ranks the global batch cannot be kept: a clear error.
# Usage: resume_world_size.sh WORKDIR MPIEXEC TANDEM_TRAIN
set -uo pipefail
source "$(dirname "$0")/fault_lib.sh"
work=$1 mpiexec=$2 tt=$3
cmp=$(dirname "$0")/compare_weights.py
rm -rf "$work" && mkdir -p "$work"
mpi() { local np=$1; shift; timeout -k 5 150 "$mpiexec" -np "$np" --oversubscribe --bind-to none "$tt" "$@"; }
flags=(--model mlp --no-eval --threads 1 --epochs 1 --max-steps 16 --global-batch-size 64 --lr-schedule constant)
mpi 2 "${flags[@]}" --save "$work/ref" --save-every 8 >"$work/ref.log" 2>&1 || { cat "$work/ref.log"; fail "2-rank run"; }
for np in 1 4; do
  mpi "$np" "${flags[@]}" --resume "$work/ref/ckpt-00000008" --save "$work/np$np" >"$work/np$np.log" 2>&1 \
    || { cat "$work/np$np.log"; fail "resume on $np ranks"; }
  grep -q "batch 64 per rank\|batch $((64 / np)) per rank" "$work/np$np.log" || fail "np $np: per-rank batch not $((64 / np))"
  result=$(python3 "$cmp" "$work/ref/ckpt-00000016/model.safetensors" "$work/np$np/ckpt-00000016/model.safetensors" 1e-6)
  ok=$?
  echo "resume_world_size: 2 ranks -> $np ranks at step 8, 16 steps: $result"
  [[ $ok -eq 0 ]] || fail "weights differ beyond fp32 rounding after resuming on $np ranks"
done
mpi 3 "${flags[@]}" --resume "$work/ref/ckpt-00000008" >"$work/np3.log" 2>&1 && fail "3 ranks accepted global batch 64"
grep -q "global-batch-size 64 cannot be kept on 3 ranks" "$work/np3.log" || { cat "$work/np3.log"; fail "no clear error on 3 ranks"; }
echo PASS
