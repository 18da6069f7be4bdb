# lib.sh — the harness test_cli.sh and test_genif.sh share: sourced after ZZ (the
# zigzag binary, absolute) is set, with the work directory's name prefix as $1.
# Clears the ZZ_* tunables but ZZ_DEVICE (the checks see defaults), makes and
# enters the work directory $W (removed at exit), and defines the check helpers.
# Every zigzag run goes through zz, under `timeout 60` (CLI_HANG=S before zz gives
# one long run S seconds) so a hang fails the check instead of the suite.
for v in $(env | sed -n 's/^\(ZZ_[A-Za-z0-9_]*\)=.*/\1/p'); do
  [ "$v" = ZZ_DEVICE ] || unset "$v"
done
W=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 2
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 2

PASS=0
FAIL=0
ok() { echo "ok - $1"; PASS=$((PASS + 1)); }
not_ok() {
  echo "not ok - $1"
  FAIL=$((FAIL + 1))
  # the last command's stderr helps to see why
  [ -s "$W/err" ] && sed -e 's/^/#   /' "$W/err" | head -n 8
  return 0
}
# check DESCRIPTION COMMAND...: ok when the command succeeds
check() {
  local d=$1
  shift
  if "$@"; then ok "$d"; else not_ok "$d"; fi
}
# zz ARGS...: runs zigzag with stdout in $W/outp, stderr in $W/err, status in RC
zz() {
  timeout "${CLI_HANG:-60}" "$ZZ" "$@" >"$W/outp" 2>"$W/err"
  RC=$?
}
has() { grep -qF -- "$1" "$2"; }
