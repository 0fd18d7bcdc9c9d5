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
# The cnn with --sync-bn: SyncBatchNorm's statistics are over the global batch (16 here) whatever the
# world size, so 1 rank (--mode ddp: plain --sync-bn on 1 rank is refused as there is nothing to sync)
# computes what 2 and 4 do, up to the order of the sums; running stats and num_batches_tracked are in
# model.safetensors too (the I64 counts must be equal). 8 steps, checkpoint at 4: seconds.
cnn=(--model cnn --sync-bn --mode ddp --no-eval --threads 1 --epochs 1 --max-steps 8 --global-batch-size 16
     --lr-schedule constant)
mpi 2 "${cnn[@]}" --save "$work/cnn" --save-every 4 >"$work/cnn.log" 2>&1 || { cat "$work/cnn.log"; fail "2-rank cnn run"; }
for np in 1 4; do
  mpi "$np" "${cnn[@]}" --resume "$work/cnn/ckpt-00000004" --save "$work/cnn$np" >"$work/cnn$np.log" 2>&1 \
    || { cat "$work/cnn$np.log"; fail "cnn resume on $np ranks"; }
  grep -q "batch $((16 / np)) per rank" "$work/cnn$np.log" || fail "cnn np $np: per-rank batch not $((16 / np))"
  result=$(python3 "$cmp" "$work/cnn/ckpt-00000008/model.safetensors" "$work/cnn$np/ckpt-00000008/model.safetensors" 1e-5)
  ok=$?
  echo "resume_world_size: cnn --sync-bn 2 ranks -> $np ranks at step 4, 8 steps: $result"
  [[ $ok -eq 0 ]] || fail "cnn --sync-bn weights differ beyond fp32 rounding after resuming on $np ranks"
done
mpi 3 "${flags[@]}" --resume "$work/ref/ckpt-00000008" >"$work/np3.log" 2>&1 && fail "3 ranks accepted global batch 64"
grep -q "global-batch-size 64 cannot be kept on 3 ranks" "$work/np3.log" || { cat "$work/np3.log"; fail "no clear error on 3 ranks"; }
echo PASS
