#!/usr/bin/env bash
# gpu-kit-lib.sh — sourced by gpu-kit.sh, gpu-check.sh and gpu-kit-test.sh: which
# packages the kit leaves to the system, how it is unpacked into a prefix without
# root or network, and the environment that builds and runs zigzag from that
# prefix alone.

# Left to the system: what every image that runs Python and PyTorch has, and
# what must not be shadowed by Debian 12's older copies (glibc, the GCC runtime,
# zlib), or what a single-machine run never uses (ssh for remote ranks, package
# management).
zz_kit_is_base() {
  case "$1" in
    libc6 | libc-bin | libgcc-s1 | libstdc++6 | gcc-*-base | zlib1g | libcrypt1 | debconf | dpkg | perl-base | \
      tar | debianutils | adduser | passwd | openssh-client | libselinux1 | libpcre2-8-0 | libaudit1 | \
      libaudit-common | libpam* | libssl3 | libzstd1 | liblzma5 | libbz2-1.0 | libmd0 | libtinfo6 | \
      install-info | sensible-utils | init-system-helpers | lsb-base | sysvinit-utils) return 0 ;;
  esac
  return 1
}

ZZ_KIT_MULTIARCH=x86_64-linux-gnu

# A .deb's files into PREFIX: dpkg-deb where there is one, else the ar archive's
# data member through tar (an image without dpkg).
zz_kit_extract() {
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$1" "$2"
  else
    local member
    member=$(ar t "$1" | grep '^data\.tar') || return 1
    case $member in
      *.xz) ar p "$1" "$member" | tar -xJ -C "$2" ;;
      *.zst) ar p "$1" "$member" | zstd -dc | tar -x -C "$2" ;;
      *.gz) ar p "$1" "$member" | tar -xz -C "$2" ;;
      *) ar p "$1" "$member" | tar -x -C "$2" ;;
    esac
  fi
}

# zz_kit_unpack KIT PREFIX: every .deb of KIT/debs into PREFIX (dpkg-deb -x, no
# maintainer scripts run), then what those scripts would have done that the
# build needs: Debian's update-alternatives links (OpenBLAS's library and .pc
# file, Open MPI's mpicc/mpirun), and absolute symbolic links made relative so
# that they point inside the prefix.
zz_kit_unpack() {
  local kit=$1 prefix=$2 d lib link target
  [ -d "$kit/debs" ] && ls "$kit"/debs/*.deb >/dev/null 2>&1 || {
    echo "gpu-kit: no packages in $kit/debs: run 'bash scripts/gpu-kit.sh' on a Debian 12 machine first" >&2
    return 1
  }
  rm -rf "$prefix"
  mkdir -p "$prefix"
  for d in "$kit"/debs/*.deb; do zz_kit_extract "$d" "$prefix" || { echo "gpu-kit: cannot unpack $d" >&2; return 1; }; done
  # absolute links (/usr/lib/...) would point at the system's copy, or nowhere
  while IFS= read -r link; do
    target=$(readlink "$link")
    case "$target" in /*) ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$prefix$target")" "$link" ;; esac
  done < <(find "$prefix" -type l)
  lib=$prefix/usr/lib/$ZZ_KIT_MULTIARCH
  # update-alternatives: OpenBLAS (pthread flavour) and Open MPI's wrappers and launcher
  if [ -d "$lib/openblas-pthread" ]; then
    ln -sfn openblas-pthread/libopenblas.so "$lib/libopenblas.so"
    ln -sfn openblas-pthread/libopenblas.so.0 "$lib/libopenblas.so.0"
    mkdir -p "$lib/pkgconfig"
    ln -sfn ../openblas-pthread/pkgconfig/openblas.pc "$lib/pkgconfig/openblas.pc"
  fi
  for f in mpicc mpirun mpiexec orterun; do
    [ -e "$prefix/usr/bin/$f.openmpi" ] && ln -sfn "$f.openmpi" "$prefix/usr/bin/$f"
  done
  return 0
}

# zz_kit_env PREFIX: exports what builds and runs against PREFIX alone.
zz_kit_env() {
  local prefix
  prefix=$(realpath "$1")
  local lib=$prefix/usr/lib/$ZZ_KIT_MULTIARCH
  export ZZ_KIT_PREFIX=$prefix
  export PATH=$prefix/usr/bin:$PATH
  # pkg-config: the kit's .pc files only, their /usr paths moved under the prefix
  export PKG_CONFIG_LIBDIR=$lib/pkgconfig:$prefix/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$prefix
  unset PKG_CONFIG_PATH
  # Debian's multiarch headers (hwloc/autogen/config.h, openblas-pthread/...): the
  # compiler searches only the system's /usr/include/x86_64-linux-gnu by itself
  export C_INCLUDE_PATH=$prefix/usr/include/$ZZ_KIT_MULTIARCH${C_INCLUDE_PATH:+:$C_INCLUDE_PATH}
  # Open MPI finds its help files, wrapper data and components from OPAL_PREFIX
  export OPAL_PREFIX=$prefix/usr
  export OPAL_LIBDIR=$lib/openmpi/lib
  # PMIx looks for its plugins at the path it was built with (/usr/lib/...); an image
  # with another PMIx there (the H100 machine's) made it load a foreign plugin and
  # print a page of warnings on every mpirun, which broke the tests reading stderr
  export PMIX_MCA_mca_base_component_path=$lib/pmix2/lib/pmix
  export ZZ_KIT_LIBPATH=$lib:$lib/openmpi/lib:$lib/openblas-pthread:$lib/pmix2/lib:$lib/libfabric:$lib/ucx
}
