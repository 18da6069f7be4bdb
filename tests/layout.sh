#!/usr/bin/env bash
# layout.sh ROOT — the layering rules of issue #23 that a compiler does not check:
# the token loop (runtime/generate.c) sees the engine only through its public
# header (no *_impl.h), and every header of runtime/ stays under 300 lines (split
# by concern rather than grown). Prints each breach and exits 1 when there is one.
set -u
root=${1:?usage: layout.sh ROOT}
fail=0
if grep -n '^#include "[^"]*_impl\.h"' "$root/runtime/generate.c"; then
  echo "layout: runtime/generate.c includes an internal header (above); use zz_engine.h" >&2
  fail=1
fi
while IFS= read -r h; do
  n=$(wc -l < "$h")
  if [ "$n" -gt 300 ]; then
    echo "layout: ${h#"$root"/} has $n lines (at most 300: split it by concern)" >&2
    fail=1
  fi
done < <(find "$root/runtime" -name '*.h')
[ "$fail" -eq 0 ] && echo "layout: ok"
exit "$fail"
