#!/usr/bin/env bash
# gpu-kit-test.sh [BUDGET_SECONDS] — checks here, without a GPU, that gpu-kit/
# alone builds and runs zigzag, the way the GPU machine (or an offline cluster)
# will see it: in a private mount namespace where the system's copies of every
# package the kit carries (and of the -dev packages, plugins and alternatives
# links that came with them here) are hidden by overlayfs whiteouts over /usr and
# /etc, it runs scripts/gpu-check.sh (unpack, build, the CPU tests, every GPU step
# skipped), then checks that the built zigzag resolves each library the kit
# provides inside the kit's prefix, with no LD_LIBRARY_PATH.
#
#   bash scripts/gpu-kit.sh && bash scripts/gpu-kit-test.sh
#
# Needs root (unshare, mount) and overlayfs; exits 77 without them. Not part of
# ctest: it rebuilds zigzag (with CUDA when nvcc exists) and runs the whole suite.
# Environment as for gpu-check.sh; ZZ_CHECK_CTEST_ARGS narrows the CPU tests.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
. scripts/gpu-kit-lib.sh
KIT=${ZZ_KIT_DIR:-$ROOT/gpu-kit}
OUT=${OUT:-$ROOT/gpu-out}
export ZZ_KIT_PREFIX_DIR=${ZZ_KIT_PREFIX_DIR:-/tmp/zz-kit-prefix}

[ "$(id -u)" -eq 0 ] || { echo "gpu-kit-test: needs root (unshare -m, mount): skipped"; exit 77; }
command -v unshare >/dev/null || { echo "gpu-kit-test: no unshare: skipped"; exit 77; }
ls "$KIT"/debs/*.deb >/dev/null 2>&1 || { echo "gpu-kit-test: no $KIT/debs: run 'bash scripts/gpu-kit.sh' first" >&2; exit 1; }

W=$(mktemp -d /tmp/zz-kit-test.XXXXXX)
trap 'rm -rf "$W"' EXIT

# ---------------------------------------------------------------- what to hide
# the kit's packages, and what came with them here that the target lacks too
mapfile -t kitpkgs < <(for d in "$KIT"/debs/*.deb; do dpkg-deb -f "$d" Package; done)
extra=(hwloc-nox libhwloc-plugins pkg-config libevent-dev libevent-2.1-7 libevent-extra-2.1-7 libevent-openssl-2.1-7
       libpmix-dev libibverbs-dev libnl-3-dev libnl-route-3-dev libnuma-dev libltdl-dev libgmp-dev libblas3 liblapack3
       libblas-dev liblapack-dev libopenblas0-openmp libopenblas0-serial libopenblas-openmp-dev libopenblas-serial-dev
       libxnvctrl0 ocl-icd-libopencl1)
hide=()
for p in "${kitpkgs[@]}" "${extra[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && hide+=("$p")
done
echo "gpu-kit-test: hiding ${#hide[@]} installed packages: ${hide[*]}"
# their files (not directories), then any link in the library, include and bin
# directories that leads to one of them (Debian's alternatives: /usr/lib/.../
# libopenblas.so -> /etc/alternatives/... -> openblas-pthread/...)
dpkg -L "${hide[@]}" 2>/dev/null | while IFS= read -r f; do
  if [ -f "$f" ] || [ -L "$f" ]; then echo "$f"; fi
done | sort -u >"$W/files"
find /usr/lib/x86_64-linux-gnu /usr/include /usr/bin /etc/alternatives -maxdepth 2 -type l 2>/dev/null |
  while IFS= read -r l; do printf '%s\t%s\n' "$(realpath -m "$l")" "$l"; done |
  awk -F'\t' 'NR == FNR { hidden[$0] = 1; next } ($1 in hidden) { print $2 }' "$W/files" - >>"$W/files"
sort -u -o "$W/files" "$W/files"
echo "gpu-kit-test: $(wc -l <"$W/files") files hidden"
# an overlayfs whiteout (a 0/0 character device) in the upper layer: the file is absent
python3 - "$W" "$W/files" <<'EOP'
import os, sys
w = sys.argv[1]
for top in ("usr", "etc"):
    os.makedirs(f"{w}/{top}-up", exist_ok=True)
    os.makedirs(f"{w}/{top}-work", exist_ok=True)
for f in open(sys.argv[2]).read().split("\n"):
    top = f.split("/")[1] if f.startswith("/") else ""
    if top not in ("usr", "etc"):
        continue
    up = f"{w}/{top}-up" + f[len(top) + 1:]
    os.makedirs(os.path.dirname(up), exist_ok=True)
    if not os.path.lexists(up):
        os.mknod(up, 0o600 | 0o020000, os.makedev(0, 0))
EOP

# ---------------------------------------------------------------- inside the namespace
cat >"$W/inside.sh" <<'EOS'
set -uo pipefail
W=$1 ROOT=$2 BUDGET=$3
mount --make-rprivate /
for top in usr etc; do
  mount -t overlay overlay -o "lowerdir=/$top,upperdir=$W/$top-up,workdir=$W/$top-work" "/$top" ||
    { echo "gpu-kit-test: cannot mount overlayfs on /$top: skipped"; exit 77; }
done
cd "$ROOT"
# the system's copies are gone: what the build and runs use must come from the kit
bad=0
for f in /usr/include/glpk.h /usr/include/jansson.h /usr/include/CUnit/CUnit.h /usr/include/liburing.h \
         /usr/include/hwloc.h /usr/lib/x86_64-linux-gnu/libopenblas.so.0 /usr/lib/x86_64-linux-gnu/libmpi.so.40 \
         /usr/lib/x86_64-linux-gnu/libglpk.so.40 /usr/bin/mpirun /usr/bin/pkg-config; do
  [ -e "$f" ] && { echo "gpu-kit-test: FAIL: $f is still visible"; bad=1; }
done
command -v mpirun pkg-config && { echo "gpu-kit-test: FAIL: mpirun or pkg-config still on PATH"; bad=1; }
[ $bad = 0 ] || exit 1
echo "gpu-kit-test: the system's copies are hidden"
bash scripts/gpu-check.sh "$BUDGET"
rc=$?
[ $rc = 0 ] || { echo "gpu-kit-test: FAIL: gpu-check.sh exited $rc"; exit 1; }
# the built binary finds the kit's libraries by itself
zz=${ZZ_BUILD_DIR:-$ROOT/build-kit}/zigzag
env -u LD_LIBRARY_PATH ldd "$zz" >"$W/ldd" 2>&1
cat "$W/ldd"
if grep -q "not found" "$W/ldd"; then echo "gpu-kit-test: FAIL: a library of zigzag is not found"; exit 1; fi
for l in libopenblas libmpi libglpk libhwloc libjansson liburing libopen-pal libevent_core libgmp; do
  line=$(grep "$l" "$W/ldd" || true)
  [ -n "$line" ] || { echo "gpu-kit-test: FAIL: zigzag does not load $l"; exit 1; }
  echo "$line" | grep -q "=> $ZZ_KIT_PREFIX_DIR" || { echo "gpu-kit-test: FAIL: $l resolves outside the kit: $line"; exit 1; }
done
env -u LD_LIBRARY_PATH "$zz" --help >/dev/null || { echo "gpu-kit-test: FAIL: zigzag --help without LD_LIBRARY_PATH"; exit 1; }
echo "gpu-kit-test: zigzag resolves its libraries inside $ZZ_KIT_PREFIX_DIR"
EOS
set +e
OUT=$OUT unshare -m bash "$W/inside.sh" "$W" "$ROOT" "${1:-3600}"
rc=$?
set -e
[ $rc = 0 ] && echo "gpu-kit-test: PASS" || echo "gpu-kit-test: FAIL (exit $rc)"
exit $rc
