#!/usr/bin/env bash
# Runs tandem-plot and checks that the chart it names exists and is a PNG or an SVG, that nothing
# reached stderr (gnuplot's warnings included), and that each run keeps one colour in every panel.
# Usage: plot_check.sh TANDEM_PLOT OUTPUT INPUT...
set -euo pipefail
exe=$1 out=$2
shift 2
rm -f "$out"
"$exe" "$@" -o "$out" 2> "$out.stderr"
[[ ! -s "$out.stderr" ]] || { cat "$out.stderr" >&2; echo "plot_check: the lines above reached stderr" >&2; exit 1; }
[[ -s "$out" ]] || { echo "plot_check: $out missing or empty" >&2; exit 1; }
case "$out" in
  *.png) [[ "$(head -c 4 "$out" | tail -c 3)" == "PNG" ]] || { echo "plot_check: $out is not a PNG" >&2; exit 1; } ;;
  *.svg) grep -q "<svg" "$out" || { echo "plot_check: $out is not an SVG" >&2; exit 1; } ;;
esac
# Every series drew something: gnuplot's script holds a datablock per series, none empty.
! grep -Pzo '<< EOD\nEOD' "$out.gp" >/dev/null || { echo "plot_check: an empty series in $out.gp" >&2; exit 1; }
# One colour per run: its series (NAME, NAME train, NAME test) in every panel have the same colour,
# and different runs (up to eight, the palette) different ones.
declare -A colour_of
while IFS= read -r clause; do
  run=$(sed -E 's/^title "(.*)".*/\1/; s/ (train|test)$//' <<<"$clause")
  colour=$(grep -oE "lc rgb '#[0-9a-f]{6}'" <<<"$clause" || true)
  [[ -n "$colour" ]] || { echo "plot_check: no colour for $run in $out.gp" >&2; exit 1; }
  [[ "${colour_of[$run]:-$colour}" == "$colour" ]] ||
    { echo "plot_check: $run drawn in ${colour_of[$run]} and in $colour in $out.gp" >&2; exit 1; }
  colour_of[$run]=$colour
done < <(grep '^plot ' "$out.gp" | grep -oP 'title "[^"]*"[^,]*')
distinct=$(printf '%s\n' "${colour_of[@]}" | sort -u | wc -l)
(( ${#colour_of[@]} > 8 || distinct == ${#colour_of[@]} )) || { echo "plot_check: two runs share a colour in $out.gp" >&2; exit 1; }
echo "plot_check: $out ($(stat -c %s "$out") bytes)"
