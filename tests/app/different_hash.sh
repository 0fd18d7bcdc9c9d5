#!/usr/bin/env bash
# Runs tandem-train twice, with common flags and each variant's extra flags, and requires different
# param_hashes: a switch that must change the result (e.g. an A/B switch whose effect shows in bf16).
# Usage: different_hash.sh TANDEM_TRAIN "COMMON FLAGS" "FLAGS A" "FLAGS B"
set -euo pipefail
exe=$1 common=$2 a=$3 b=$4
# shellcheck disable=SC2086
ha=$("$exe" $common $a | sed -n 's/.*param_hash \([0-9a-f]*\).*/\1/p')
# shellcheck disable=SC2086
hb=$("$exe" $common $b | sed -n 's/.*param_hash \([0-9a-f]*\).*/\1/p')
echo "[$a] $ha  [$b] $hb"
[[ -n "$ha" && -n "$hb" && "$ha" != "$hb" ]] || { echo "different_hash: the same param_hash" >&2; exit 1; }
