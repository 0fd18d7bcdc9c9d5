#!/usr/bin/env bash
# Runs tandem-plot and checks that the chart it names exists and is a PNG or an SVG.
# Usage: plot_check.sh TANDEM_PLOT OUTPUT INPUT...
set -euo pipefail
exe=$1 out=$2
shift 2
rm -f "$out"
"$exe" "$@" -o "$out"
[[ -s "$out" ]] || { echo "plot_check: $out missing or empty" >&2; exit 1; }
case "$out" in
  *.png) [[ "$(head -c 4 "$out" | tail -c 3)" == "PNG" ]] || { echo "plot_check: $out is not a PNG" >&2; exit 1; } ;;
  *.svg) grep -q "<svg" "$out" || { echo "plot_check: $out is not an SVG" >&2; exit 1; } ;;
esac
# Every series drew something: gnuplot's script holds a datablock per series, none empty.
! grep -Pzo '<< EOD\nEOD' "$out.gp" >/dev/null || { echo "plot_check: an empty series in $out.gp" >&2; exit 1; }
echo "plot_check: $out ($(stat -c %s "$out") bytes)"
