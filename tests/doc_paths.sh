#!/usr/bin/env bash
# doc_paths.sh ROOT — every path that docs/map.md, docs/cpu.md and docs/results.md
# name in backquotes exists in the tree: a word that starts with one of the tree's
# folders (runtime/, kernels/, launch/, stage/, planner/, bench/, tests/, scripts/,
# docs/), or a bare NAME.md (a page of docs/); a program (bench/peak_probe) stands
# for its source (bench/peak_probe.c). A file moved without its row (the
# map's promise: each idea's one home) prints the page, its line and the path,
# and the test fails.
set -u
root=${1:?usage: doc_paths.sh ROOT}
fail=0
for page in docs/map.md docs/cpu.md docs/results.md; do
  [ -f "$root/$page" ] || { echo "doc_paths: $page is missing" >&2; fail=1; continue; }
  while IFS=: read -r line word; do
    path=${word#\`} path=${path%\`}
    path=${path%%[ (:,]*} # the path alone: before a space, a parenthesis or a colon
    case $path in
      runtime/* | kernels/* | launch/* | stage/* | planner/* | bench/* | tests/* | scripts/* | docs/*) ;;
      *.md) [[ $path == */* ]] && continue; path=docs/$path ;;
      *) continue ;;
    esac
    if [ ! -e "$root/$path" ] && [ ! -e "$root/$path.c" ]; then
      echo "doc_paths: $page:$line names $path, which is not in the tree" >&2
      fail=1
    fi
  done < <(grep -no '`[^`]*`' "$root/$page")
done
[ "$fail" -eq 0 ] && echo "doc_paths: ok"
exit "$fail"
