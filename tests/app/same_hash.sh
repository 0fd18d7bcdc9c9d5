#!/usr/bin/env bash
# Runs tandem-train twice, with common flags and each variant's extra flags, and requires the same
# param_hash (e.g. --checkpoint-activations must not change the result).
# Usage: same_hash.sh TANDEM_TRAIN "COMMON FLAGS" "FLAGS A" "FLAGS B"
set -euo pipefail
exe=$1 common=$2 a=$3 b=$4
# shellcheck disable=SC2086
ha=$("$exe" $common $a | sed -n 's/.*param_hash \([0-9a-f]*\).*/\1/p')
# shellcheck disable=SC2086
hb=$("$exe" $common $b | sed -n 's/.*param_hash \([0-9a-f]*\).*/\1/p')
echo "[$a] $ha  [$b] $hb"
[[ -n "$ha" && "$ha" == "$hb" ]] || { echo "same_hash: param_hash differs" >&2; exit 1; }
