#!/usr/bin/env bash
# layout.sh ROOT — the layering rules of issue #23 that a compiler does not check:
# the token loop (runtime/generate.c) sees the engine only through its public
# header (no *_impl.h); no folder includes another folder's *_impl.h (the text
# code in runtime/text/ sees the rest of runtime/ only through public headers);
# and every header of the tree stays under 300 lines (split by concern rather
# than grown). Prints each breach and exits 1 when there is one.
set -u
root=${1:?usage: layout.sh ROOT}
fail=0
if grep -n '^#include "[^"]*_impl\.h"' "$root/runtime/generate.c"; then
  echo "layout: runtime/generate.c includes an internal header (above); use zz_engine.h" >&2
  fail=1
fi
# Outside tests/ (white-box tests may reach in), an *_impl.h is included only from
# its own folder: runtime/text/ sees runtime/ only through public headers, and so
# does every other folder.
while IFS= read -r src; do
  while IFS=: read -r line inc; do
    name=$(sed -n 's/^#include "\([^"]*\)".*/\1/p' <<<"$inc")
    if [ ! -f "$(dirname "$src")/$name" ]; then
      echo "layout: ${src#"$root"/}:$line includes $name, internal to another folder (use a public zz_*.h)" >&2
      fail=1
    fi
  done < <(grep -n '^#include "[^"]*_impl\.h"' "$src")
done < <(find "$root" \( -name 'build*' -o -name .git -o -path "$root/tests" \) -prune -o \
  \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print)
while IFS= read -r h; do
  n=$(wc -l < "$h")
  if [ "$n" -gt 300 ]; then
    echo "layout: ${h#"$root"/} has $n lines (at most 300: split it by concern)" >&2
    fail=1
  fi
done < <(find "$root" \( -name 'build*' -o -name .git \) -prune -o \( -name '*.h' -o -name '*.cuh' \) -print)
[ "$fail" -eq 0 ] && echo "layout: ok"
exit "$fail"
