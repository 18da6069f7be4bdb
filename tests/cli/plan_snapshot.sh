#!/usr/bin/env bash
# plan_snapshot.sh ZIGZAG SNAPDIR [--update] — `zigzag plan --json` for each line of
# SNAPDIR/cases.txt (presets x hardware files, searches and given policies, one
# machine and pipelines), compared byte for byte with SNAPDIR/expected.txt, which
# was taken from the binary before the planning refactor (issue 23): a change of
# the planner's numbers shows here as a diff. search_s (a wall time) is blanked.
# --update rewrites expected.txt from ZIGZAG (only when a change is meant).
set -u
ZZ=$1 SNAP=$(cd "$2" && pwd) UPDATE=${3:-}
HWDIR=$(cd "$SNAP/../../../planner/hw" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
run_case() { # $1: case number, $2: the arguments
  local args=${2//@HW@/$HWDIR}
  args=${args//@FX@/$SNAP}
  # shellcheck disable=SC2086
  timeout 300 "$ZZ" plan --json $args >"$WORK/$1.out" 2>"$WORK/$1.err"
  local rc=$?
  {
    echo "== plan ${2}"
    echo "rc $rc"
    sed -E 's/"search_s": [-0-9.e+]+/"search_s": X/' "$WORK/$1.out"
    # stderr: the progress lines of a long pipeline search carry seconds too
    grep -v '^planner: .* so far$\|^plan: .* planned in ' "$WORK/$1.err" | sed "s#$HWDIR#@HW@#g; s#$SNAP#@FX@#g"
  } >"$WORK/$1.txt"
}
n=0
while IFS= read -r line; do
  case "$line" in '#'* | '') continue ;; esac
  n=$((n + 1))
  run_case "$n" "$line" &
  if (( n % 2 == 0 )); then wait; fi # two at a time: the machine has two cores
done <"$SNAP/cases.txt"
wait
: >"$WORK/all.txt"
for i in $(seq 1 "$n"); do cat "$WORK/$i.txt" >>"$WORK/all.txt"; done
if [ "$UPDATE" = --update ]; then
  cp "$WORK/all.txt" "$SNAP/expected.txt"
  echo "plan_snapshot: wrote $SNAP/expected.txt ($n cases)"
  exit 0
fi
if diff -u "$SNAP/expected.txt" "$WORK/all.txt"; then
  echo "plan_snapshot: $n cases byte-identical"
  exit 0
fi
echo "plan_snapshot: FAILED: the plan output above differs from $SNAP/expected.txt" >&2
exit 1
