#!/usr/bin/env bash
# Resume on another world size: 16 mlp steps on 2 ranks (batch 32 each, global 64), checkpoint at
# step 8; resumed from it on 1 rank and on 4 ranks with --global-batch-size 64, each step takes the
# same 64 samples (the sampler deals the (seed, epoch) permutation round-robin, so global batch b is
# entries [64b, 64b+64) on any world size), so the final weights must match the uninterrupted 2-rank
# run's to fp32 rounding: max |difference| <= 1e-6 (weights are O(0.05); sums over a different
# number of ranks round differently). The same for the cnn with --sync-bn (8 steps, G = 16, 1e-5:
# running variances are O(1)). On 3 ranks the global batch cannot be kept: a clear error.
# Usage: resume_world_size.sh WORKDIR MPIEXEC TANDEM_TRAIN
set -uo pipefail
source "$(dirname "$0")/fault_lib.sh"
work=$1 mpiexec=$2 tt=$3
cmp=$(dirname "$0")/compare_weights.py
rm -rf "$work" && mkdir -p "$work"
mpi() { local np=$1; shift; timeout -k 5 150 "$mpiexec" -np "$np" "$tt" "$@"; }
flags=(--model mlp --no-eval --threads 1 --epochs 1 --max-steps 16 --global-batch-size 64 --lr-schedule constant)
# A 2-rank run of `what` (flags in the array named by $2) saved every $3 steps, resumed from its
# checkpoint at step $3 on 1 and on 4 ranks to step 2*$3: the same per-rank share of global batch $4,
# and the final weights within tolerance $5 of the run that never stopped.
resume_across() {
  local what=$1 half=$3 global=$4 tol=$5
  local -n run_flags=$2
  local ref="$work/$what" first second
  first=$(printf 'ckpt-%08d' "$half") second=$(printf 'ckpt-%08d' $((2 * half)))
  mpi 2 "${run_flags[@]}" --save "$ref" --save-every "$half" >"$ref.log" 2>&1 || { cat "$ref.log"; fail "2-rank $what run"; }
  for np in 1 4; do
    mpi "$np" "${run_flags[@]}" --resume "$ref/$first" --save "$ref$np" >"$ref$np.log" 2>&1 \
      || { cat "$ref$np.log"; fail "$what resume on $np ranks"; }
    grep -q "batch $((global / np)) per rank" "$ref$np.log" || fail "$what np $np: per-rank batch not $((global / np))"
    result=$(python3 "$cmp" "$ref/$second/model.safetensors" "$ref$np/$second/model.safetensors" "$tol")
    ok=$?
    echo "resume_world_size: $what 2 ranks -> $np ranks at step $half, $((2 * half)) steps: $result"
    [[ $ok -eq 0 ]] || fail "$what weights differ beyond fp32 rounding after resuming on $np ranks"
  done
}
resume_across mlp flags 8 64 1e-6
# The cnn with --sync-bn: SyncBatchNorm's statistics are over the global batch (16 here) whatever the
# world size, so 1 rank (--mode ddp: plain --sync-bn on 1 rank is refused as there is nothing to sync)
# computes what 2 and 4 do, up to the order of the sums; running stats and num_batches_tracked are in
# model.safetensors too (the I64 counts must be equal). 8 steps, checkpoint at 4: seconds.
cnn=(--model cnn --sync-bn --mode ddp --no-eval --threads 1 --epochs 1 --max-steps 8 --global-batch-size 16
     --lr-schedule constant)
resume_across cnn-sync-bn cnn 4 16 1e-5
mpi 3 "${flags[@]}" --resume "$work/mlp/ckpt-00000008" >"$work/np3.log" 2>&1 && fail "3 ranks accepted global batch 64"
grep -q "global-batch-size 64 cannot be kept on 3 ranks" "$work/np3.log" || { cat "$work/np3.log"; fail "no clear error on 3 ranks"; }
echo PASS
