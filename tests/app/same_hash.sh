#!/usr/bin/env bash
# Runs tandem-train twice, with common flags and each variant's extra flags, and requires the same
# param_hash (e.g. --checkpoint-activations must not change the result); with PATTERN, the second
# run's output must also contain it (e.g. the log line showing its flag took effect).
# Usage: same_hash.sh TANDEM_TRAIN "COMMON FLAGS" "FLAGS A" "FLAGS B" [PATTERN]
set -euo pipefail
exe=$1 common=$2 a=$3 b=$4 pattern=${5:-}
# shellcheck disable=SC2086
oa=$("$exe" $common $a)
# shellcheck disable=SC2086
ob=$("$exe" $common $b)
ha=$(sed -n 's/.*param_hash \([0-9a-f]*\).*/\1/p' <<<"$oa")
hb=$(sed -n 's/.*param_hash \([0-9a-f]*\).*/\1/p' <<<"$ob")
echo "[$a] $ha  [$b] $hb"
[[ -n "$ha" && "$ha" == "$hb" ]] || { echo "same_hash: param_hash differs" >&2; exit 1; }
if [[ -n "$pattern" ]] && ! grep -q -- "$pattern" <<<"$ob"; then
  echo "same_hash: the run with [$b] does not print '$pattern':" >&2
  echo "$ob" >&2
  exit 1
fi
