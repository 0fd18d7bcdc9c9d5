#!/usr/bin/env bash
# The checkpoint directory on a full filesystem (a 7 MiB tmpfs: the mlp's first checkpoint, 5.4 MB,
# fits; the second does not): the run must stop with exit code 1 and an error naming the directory,
# leave no partial temporary behind, keep `latest` on the previous checkpoint, and a resume from it
# must end with the param_hash of an uninterrupted run. Exit 77 (skipped) where no tmpfs can be
# mounted (not root, or no CAP_SYS_ADMIN).
# Usage: disk_full.sh WORKDIR TANDEM_TRAIN
set -uo pipefail
source "$(dirname "$0")/fault_lib.sh"
work=$1 tt=$2
rm -rf "$work" && mkdir -p "$work/mnt"
if [[ $(id -u) -ne 0 ]] || ! mount -t tmpfs -o size=7m tandem-full "$work/mnt" 2>/dev/null; then
  echo "SKIP: cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)"; exit 77
fi
trap 'umount "$work/mnt"' EXIT
run=("$tt" "${TT_FLAGS[@]}" --max-steps 12 --save-every 4)
"${run[@]}" --save "$work/ref" --metrics "$work/ref.jsonl" >"$work/ref.log" 2>&1 || { cat "$work/ref.log"; fail "reference run"; }
want=$(done_hash "$work/ref.jsonl")
ck="$work/mnt/ck"
"${run[@]}" --save "$ck" >"$work/full.log" 2>&1
rc=$?
cat "$work/full.log"
# Exit code 1; under the ASan stage LeakSanitizer may turn a clean error exit into its own code.
[[ $rc -eq 1 || ( -n ${ASAN_OPTIONS:-} && $rc -ne 0 ) ]] || fail "exit code $rc on a full disk, expected 1"
grep -q "saving the checkpoint of step 8 into '$ck' failed" "$work/full.log" || fail "the error does not name '$ck'"
grep -q "No space left on device" "$work/full.log" || fail "the error does not say the disk is full"
[[ $(cat "$ck/latest") == ckpt-00000004 ]] || fail "latest moved: $(cat "$ck/latest")"
leftover=$(ls -a "$ck" | grep -E '^\.tmp-|\.tmp\.' || true)
[[ -z $leftover ]] || fail "partial temporaries left on the full disk: $leftover"
"$tt" "${TT_FLAGS[@]}" --max-steps 12 --resume "$ck" --metrics "$work/resumed.jsonl" >"$work/resume.log" 2>&1 \
  || { cat "$work/resume.log"; fail "resume from the intact checkpoint failed"; }
have=$(done_hash "$work/resumed.jsonl")
echo "fault_table: disk_full rc=$rc latest=$(cat "$ck/latest") resumed_hash=$have want=$want"
[[ -n $want && $have == "$want" ]] || fail "resumed param_hash $have, uninterrupted $want"
echo PASS
