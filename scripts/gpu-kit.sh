#!/usr/bin/env bash
# gpu-kit.sh — gathers, on a Debian 12 machine that reaches the package
# registries, everything zigzag needs to build and run on a machine that has
# none of it and no network (the GPU machine, an offline cluster): the Debian 12
# packages of its libraries with their runtime dependencies, Open MPI with its
# launcher, pkg-config, and the Python wheels of the FlexGen comparison that a
# PyTorch image lacks. Nothing is installed here.
#
#   bash scripts/gpu-kit.sh            # -> gpu-kit/ at the repository root (git-ignored)
#
# Then copy the tree with gpu-kit/ to the other machine and run
# `bash scripts/gpu-check.sh` there (docs/cuda.md). scripts/gpu-kit-lib.sh
# unpacks the kit into a prefix; scripts/gpu-kit-test.sh checks here that the
# kit alone builds zigzag.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-kit-lib.sh

KIT=${ZZ_KIT_DIR:-gpu-kit}
LIMIT_MB=48

# What zigzag's build and runs use directly. Everything these depend on (first
# alternative of each Depends/Pre-Depends, recursively) comes too, except the
# -dev packages' own -dev and compiler dependencies (only the headers and link
# names of the libraries zigzag links are needed) and zz_kit_base: what any
# image that runs Python and PyTorch has, and must not be replaced by older
# copies (libc, libstdc++, zlib, ...).
top=(libopenblas-dev libopenblas-pthread-dev libopenmpi-dev openmpi-bin libglpk-dev libhwloc-dev
     libcunit1-dev libjansson-dev liburing-dev pkgconf pkgconf-bin libpkgconf3)
# Python packages flexgen_compare.py imports that a PyTorch image lacks: flexgen
# itself. Its other needs (torch, transformers, numpy, tqdm, attrs) are on such an
# image; pulp, which it lists, is only used by its cost model, never by flex_opt.
wheels=(flexgen==0.1.8)

# Package names of one Depends/Pre-Depends group each: the first alternative, or
# for a virtual package its first provider.
zz_kit_deps() {
  apt-cache depends --important "$1" 2>/dev/null | awk '
    NR == 1 { next }
    /^ *\|?(Pre)?Depends:/ {
      alt_next = prev_alt; prev_alt = ($1 ~ /^\|/)
      if (alt_next) { skip = 1; next }          # a later alternative of a group
      skip = 0; name = $2
      if (name ~ /^</) { want_provider = 1; next }
      want_provider = 0; print name; next
    }
    /^    / { if (want_provider && !skip) { print $1; want_provider = 0 } }'
}

zz_kit_closure() {
  declare -A seen=()
  local queue=("${top[@]}") p d
  while [ ${#queue[@]} -gt 0 ]; do
    p=${queue[0]}
    queue=("${queue[@]:1}")
    p=${p%%:*}
    [ -n "${seen[$p]:-}" ] && continue
    seen[$p]=1
    zz_kit_is_base "$p" && continue
    # hwloc's optional plugins (X11, OpenCL, NVML, libxml2 with ICU: 10 MB) are
    # dlopen()ed when present; hwloc and Open MPI work without them
    [ "$p" = libhwloc-plugins ] && continue
    echo "$p"
    for d in $(zz_kit_deps "$p"); do
      d=${d%%:*}
      # a -dev package's -dev and compiler dependencies are not needed to link zigzag
      case "$p" in *-dev) case "$d" in *-dev | gfortran* | flang* | gcc* | libjs-*) continue ;; esac ;; esac
      [ -z "${seen[$d]:-}" ] && queue+=("$d")
    done
  done
}

if ! grep -qs 'ID=debian' /etc/os-release || ! grep -qs 'VERSION_ID="12"' /etc/os-release; then
  echo "gpu-kit: this is not Debian 12 ($(. /etc/os-release; echo "$PRETTY_NAME")): the kit's packages" \
       "must be Debian 12's, whose glibc (2.36) is older than the target's" >&2
  exit 1
fi
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || { echo "gpu-kit: needs apt-get and dpkg-deb" >&2; exit 1; }

# apt's lists (apt-cache and apt-get download read them); a stale or empty list
# finds nothing
if [ "$(id -u)" -eq 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi

rm -rf "$KIT.tmp"
mkdir -p "$KIT.tmp/debs" "$KIT.tmp/wheels"
mapfile -t pkgs < <(zz_kit_closure | sort -u)
echo "gpu-kit: ${#pkgs[@]} Debian packages: ${pkgs[*]}"
(cd "$KIT.tmp/debs" && apt-get download -q -o APT::Sandbox::User="$(id -un)" "${pkgs[@]}" >/dev/null)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform any --platform manylinux_2_17_x86_64 -d "$KIT.tmp/wheels" "${wheels[@]}"
{
  echo "# zigzag gpu-kit, made $(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release; echo "$PRETTY_NAME")"
  (cd "$KIT.tmp" && sha256sum debs/*.deb wheels/*.whl)
} >"$KIT.tmp/MANIFEST"
rm -rf "$KIT"
mv "$KIT.tmp" "$KIT"

mb=$(du -sm "$KIT" | cut -f1)
echo "gpu-kit: $KIT/ holds $(ls "$KIT"/debs | wc -l) packages and $(ls "$KIT"/wheels | wc -l) wheels, $(du -sh "$KIT" | cut -f1) in all:"
(cd "$KIT" && du -h debs/*.deb wheels/*.whl | sort -h | awk '{printf "  %6s  %s\n", $1, $2}')
if [ "$mb" -gt "$LIMIT_MB" ]; then
  echo "gpu-kit: $KIT/ is $mb MiB, over the $LIMIT_MB MiB it must fit in (the tree that travels is 64 MiB)" >&2
  exit 1
fi
