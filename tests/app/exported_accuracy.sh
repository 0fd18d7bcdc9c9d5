#!/usr/bin/env bash
# --save-onnx exports the model the run evaluated: a run's reported test accuracy must be the
# exported file's own (the file trained one step at --lr 1e-30, which changes no weight, then
# evaluated; Fashion-MNIST's test set in both). With --ema, the average's weights.
# Usage: exported_accuracy.sh TANDEM_TRAIN OUT.onnx "FLAGS OF THE RUN"
set -euo pipefail
tt=$1 out=$2 flags=$3
rm -f "$out"
# shellcheck disable=SC2086
ra=$("$tt" $flags --save-onnx "$out")
rb=$("$tt" --model "$out" --lr 1e-30 --max-steps 1 --epochs 1 --threads 1 --eval-batch-size 2000)
acc() { sed -n 's/.*test accuracy \([0-9.]*\) on.*/\1/p' <<<"$1"; }
a=$(acc "$ra") b=$(acc "$rb")
echo "the run: $a  its export: $b"
[[ -n "$a" && "$a" == "$b" ]] || { echo "exported_accuracy: the exported model is not the one the run evaluated" >&2; exit 1; }
