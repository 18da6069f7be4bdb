#!/usr/bin/env bash
# isa_emu.sh — runs one Linux x86-64 program under an emulated CPU with AVX-512
# F/BW/VL/DQ and VNNI (Bochs 2.7's `tigerlake` model), or with AVX512_BF16 and
# AMX (Bochs 3.0's `sapphire_rapids`), so the AVX-512 and AMX paths of
# kernels/cpu can be checked against the portable ones on a machine that lacks
# those instructions. Slow (minutes; docs/cpu.md, "Under an emulated AVX-512
# CPU"), so no ctest and no CI step.
#
#   bash scripts/isa_emu.sh [options] -- BINARY [ARGS...]
#     --cpu MODEL      Bochs CPU model (default tigerlake; corei7_icelake_u,
#                      corei7_skylake_x: `bochs -help cpu` lists them;
#                      sapphire_rapids and arrow_lake run on Bochs 3.0, built
#                      once from Debian's source with scripts/bochs-3.0-amx.patch)
#     --bochs DIR      a Bochs installed under DIR (DIR/bin/bochs,
#                      DIR/share/bochs) instead of the one the model picks
#     --timeout SEC    whole run, boot included (default 1800)
#     --mem MIB        guest memory (default 2048)
#     --env VAR=VAL    set in the program's environment (repeatable)
#     --file PATH      copy PATH (file or folder) into the guest at the same
#                      absolute path, e.g. a fixtures folder (repeatable)
#     --cu-suite NAME  a CUnit program runs only this suite (CU_basic_run_tests
#     --cu-test NAME   is replaced by an LD_PRELOAD shim), or only this test of it
#     --boot-log       print the guest's console (kernel log) to stderr at the end
#     --keep           keep the run folder (disk image, bochsrc, logs)
#
# The program's stdout comes on stdout, its stderr on stderr, and the script exits
# with its status (128+N after signal N, as a shell reports it). The emulator's own
# failures exit 125 (boot failed, kernel panic) or 124 (timeout), with a message
# and the console's last lines; nothing waits past --timeout.
#
# How: the first run installs Bochs, busybox-static, syslinux, mtools, dosfstools
# and cpio from Debian's packages (apt-get, only what is missing) and extracts
# Debian 12's kernel (linux-image-amd64, downloaded, not installed) into
# ${XDG_CACHE_HOME:-$HOME/.cache}/zigzag-isa-emu. Each run builds an initramfs of
# busybox, the program, every shared library ldd names and an init script, puts
# it with the kernel on a FAT disk image that syslinux boots, and runs Bochs
# headless: the kernel console and the program's stderr on COM1, its stdout on
# COM2 (raw, byte for byte), both to files the script reads back.
set -euo pipefail

die() {
  echo "isa_emu: $*" >&2
  exit 125
}

cpu=tigerlake timeout_s=1800 mem=2048 keep=0 boot_log=0 cu_suite="" cu_test="" bochs_dir=""
envs=() files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu) cpu=${2:?--cpu needs a model}; shift 2 ;;
    --bochs) bochs_dir=${2:?--bochs needs a folder}; shift 2 ;;
    --timeout) timeout_s=${2:?--timeout needs seconds}; shift 2 ;;
    --mem) mem=${2:?--mem needs MiB}; shift 2 ;;
    --env) envs+=("${2:?--env needs VAR=VAL}"); shift 2 ;;
    --file) files+=("${2:?--file needs a path}"); shift 2 ;;
    --cu-suite) cu_suite=${2:?--cu-suite needs a name}; shift 2 ;;
    --cu-test) cu_test=${2:?--cu-test needs a name}; shift 2 ;;
    --boot-log) boot_log=1; shift ;;
    --keep) keep=1; shift ;;
    --) shift; break ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (options before --, the program after it; --help)" ;;
  esac
done
[ $# -ge 1 ] || die "no program given (usage: isa_emu.sh [options] -- BINARY [ARGS...])"
[[ "$timeout_s" =~ ^[0-9]+$ ]] && [ "$timeout_s" -gt 0 ] || die "--timeout '$timeout_s' is not a positive number of seconds"
[[ "$mem" =~ ^[0-9]+$ ]] && [ "$mem" -ge 256 ] && [ "$mem" -le 3072 ] || die "--mem '$mem' is not 256-3072 MiB (Bochs maps no memory above the 32-bit PCI hole)"
for e in "${envs[@]}"; do
  [[ "$e" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "--env '$e' is not VAR=VALUE"
done
[ -z "$cu_test" ] || [ -n "$cu_suite" ] || die "--cu-test needs --cu-suite (the suite the test is in)"
prog=$1
shift
if [[ "$prog" != */* ]]; then
  prog=$(command -v "$prog") || die "program '$1' not found in PATH"
fi
[ -f "$prog" ] && [ -x "$prog" ] || die "program '$prog' is not an executable file"
prog=$(realpath "$prog")
file -L "$prog" 2>/dev/null | grep -q 'ELF 64-bit.*x86-64' || die "program '$prog' is not an x86-64 ELF executable"

cache=${XDG_CACHE_HOME:-$HOME/.cache}/zigzag-isa-emu
mkdir -p "$cache"

# ---- packages and kernel (once) ---------------------------------------------
need=()
for p in bochs bochsbios vgabios busybox-static syslinux syslinux-common mtools dosfstools cpio file gcc libcunit1-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ ${#need[@]} -gt 0 ]; then
  echo "isa_emu: installing ${need[*]}" >&2
  { $sudo apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; } ||
    die "could not install ${need[*]} with apt-get"
fi
kernel=$cache/vmlinuz
if [ ! -s "$kernel" ]; then
  # The kernel package linux-image-amd64 points at; only its vmlinuz is kept.
  kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  if [ -z "$kpkg" ]; then
    apt-get update -qq || true
    kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  fi
  [ -n "$kpkg" ] || die "apt-cache knows no linux-image-amd64 (is this Debian with its package lists?)"
  echo "isa_emu: downloading $kpkg (its vmlinuz only; nothing is installed)" >&2
  kdir=$(mktemp -d "$cache/kernel.XXXXXX")
  (cd "$kdir" && apt-get download -qq "$kpkg" 2>/dev/null) || die "apt-get download $kpkg failed"
  dpkg-deb --fsys-tarfile "$kdir"/*.deb | tar -x -C "$kdir" --wildcards './boot/vmlinuz-*' ||
    die "no boot/vmlinuz-* in $kpkg"
  mv "$kdir"/boot/vmlinuz-* "$kernel.tmp" && mv "$kernel.tmp" "$kernel"
  echo "$kpkg" >"$cache/vmlinuz.package"
  rm -rf "$kdir"
fi

# ---- Bochs 3.0 (once), for the models Debian 12's Bochs 2.7 lacks -------------
# Debian 13's source of Bochs 3.0, checked against its sha256, with
# scripts/bochs-3.0-amx.patch: Bochs 3.0 emulates AMX but not XFD (IA32_XFD,
# the #NM on first use of the tile data), which Linux needs before it lets a
# process use the tiles (arch_prctl ARCH_REQ_XCOMP_PERM): without it Linux 6.1
# sets XCR0 with the tile configuration and not the data, and faults at boot.
# The patch adds XFD and sign-extends the signed bytes of tdpbssd, tdpbsud and
# tdpbusd (3.0 widens them as unsigned: a -1 counts as 255).
b3_url=http://deb.debian.org/debian/pool/main/b/bochs/bochs_3.0+dfsg.orig.tar.xz
b3_sha=78f6c73d4a6472d5130a87ab9dc306d02c7c71ed8e25b3a8ef642e2a7acd282b
b3_patch=$(dirname "$0")/bochs-3.0-amx.patch
build_bochs3() { # $1: install prefix
  local src=$cache/bochs-3.0-src
  echo "isa_emu: building Bochs 3.0 into $1 (once; 4 minutes on 2 cores here)" >&2
  for p in g++ make curl xz-utils patch; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$p" >/dev/null ||
      die "could not install $p (needed to build Bochs 3.0)"
  done
  rm -rf "$src" && mkdir -p "$src"
  curl -fsSL -o "$src.tar.xz" "$b3_url" || die "could not download $b3_url"
  echo "$b3_sha  $src.tar.xz" | sha256sum -c --quiet - || die "$b3_url: not the sha256 this script knows"
  tar -xJf "$src.tar.xz" -C "$src" --strip-components=1 && rm -f "$src.tar.xz"
  patch -d "$src" -p1 -s <"$b3_patch" || die "scripts/bochs-3.0-amx.patch does not apply"
  # the same features as Debian's own build of 3.0, less its GUIs, plugins and devices
  (cd "$src" && ./configure --prefix="$1" --with-rfb --enable-debugger --disable-debugger-gui --enable-sb16 \
    --enable-x86-64 --enable-cpu-level=6 --enable-all-optimizations --enable-amx --enable-avx --enable-evex \
    --enable-cet --enable-pci --enable-fpu --enable-a20-pin --enable-protection-keys --enable-uintr \
    --enable-vmx=2 --enable-svm --enable-repeat-speedups --enable-memtype --disable-docbook >configure.log 2>&1 &&
    make -j"$(nproc)" >make.log 2>&1 && make install >install.log 2>&1) ||
    die "Bochs 3.0 did not build (logs in $src)"
  rm -rf "$src"
}
bochs=bochs bochs3=0
case "$cpu" in sapphire_rapids | arrow_lake) bochs3=1 ;; esac
if [ -z "$bochs_dir" ] && [ "$bochs3" = 1 ]; then
  bochs_dir=$cache/bochs-3.0-amx
  # rebuilt when the patch changes
  if [ ! -x "$bochs_dir/bin/bochs" ] || [ "$bochs_dir/bin/bochs" -ot "$b3_patch" ]; then
    build_bochs3 "$bochs_dir"
  fi
fi
if [ -n "$bochs_dir" ]; then
  [ -x "$bochs_dir/bin/bochs" ] || die "--bochs $bochs_dir: no bin/bochs there"
  bochs=$bochs_dir/bin/bochs
  export BXSHARE=$bochs_dir/share/bochs
  "$bochs" --help 2>&1 | grep -q 'Bochs x86 Emulator 2\.' || bochs3=1
fi

# The CUnit filter: a program's CU_basic_run_tests runs one suite or test only.
shim=""
if [ -n "$cu_suite" ]; then
  shim=$cache/cufilter.so
  if [ ! -s "$shim" ] || [ "$shim" -ot "$(dirname "$0")/isa_emu_cufilter.c" ]; then
    gcc -O2 -Wall -Wextra -shared -fPIC -o "$shim.tmp" "$(dirname "$0")/isa_emu_cufilter.c" ||
      die "could not build the CUnit filter scripts/isa_emu_cufilter.c"
    mv "$shim.tmp" "$shim"
  fi
fi

# ---- the guest's root file system --------------------------------------------
run=$(mktemp -d "$cache/run.XXXXXX")
bochs_pid=""
cleanup() {
  [ -z "$bochs_pid" ] || kill "$bochs_pid" 2>/dev/null || true
  if [ "$keep" = 1 ]; then echo "isa_emu: run folder kept: $run" >&2; else rm -rf "$run"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
root=$run/root
mkdir -p "$root"/{bin,dev,proc,sys,tmp}
busybox=$(dpkg -L busybox-static | grep -m1 '/bin/busybox$') || die "busybox-static has no bin/busybox"
cp "$busybox" "$root/bin/busybox"

# put PATH into the guest at its own absolute path (links followed)
libdirs=()
put() {
  local src=$1 dst=$root$1
  mkdir -p "$(dirname "$dst")"
  cp -L "$src" "$dst"
}
# every shared library PATH needs, at the path ldd resolved it to, and its folder on
# LD_LIBRARY_PATH (the guest has no ld.so.cache: OpenBLAS's alternatives folder)
put_libs() {
  local line lib
  while read -r line; do
    lib=""
    case "$line" in
      *'=> not found'*) die "$1 needs ${line%% *}, which ldd does not find here" ;;
      *'=> /'*) lib=${line#*=> }; lib=${lib%% (*} ;;
      /*) lib=${line%% (*} ;;
    esac
    [ -n "$lib" ] || continue
    [ -e "$root$lib" ] || put "$lib"
    local d
    d=$(dirname "$lib")
    [[ " ${libdirs[*]-} " == *" $d "* ]] || libdirs+=("$d")
  done < <(ldd "$1" 2>/dev/null || true)
}
put "$prog"
put_libs "$prog"
if [ -n "$shim" ]; then
  put "$shim"
  put_libs "$shim"
fi
for f in "${files[@]}"; do
  [ -e "$f" ] || die "--file '$f' does not exist"
  f=$(realpath "$f")
  mkdir -p "$root$(dirname "$f")"
  cp -a -L "$f" "$root$(dirname "$f")/"
done

# single quotes for the guest's shell
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
{
  echo '#!/bin/busybox sh'
  echo '/bin/busybox mount -t devtmpfs dev /dev'
  # init lets go of the console: the run below holds ttyS0 alone, so its last
  # close waits until every byte has left the port (poweroff would cut them)
  echo 'exec </dev/null >/dev/null 2>&1'
  echo '/bin/busybox --install -s /bin'
  echo 'export PATH=/bin'
  echo 'mount -t proc proc /proc; mount -t sysfs sys /sys'
  # raw: the program's bytes reach the files unchanged (no \n -> \r\n)
  echo 'stty -F /dev/ttyS0 115200 raw -echo; stty -F /dev/ttyS1 115200 raw -echo'
  echo '('
  echo 'grep -m1 "^flags" /proc/cpuinfo | sed "s/^/@@ZZ_ISA_EMU_CPU /"'
  printf 'mkdir -p %s; cd %s\n' "$(q "$PWD")" "$(q "$PWD")"
  [ ${#libdirs[@]} -eq 0 ] || printf 'export LD_LIBRARY_PATH=%s\n' "$(q "$(
    IFS=:
    echo "${libdirs[*]}"
  )")"
  [ -z "$shim" ] || printf 'export LD_PRELOAD=%s ZZ_CU_SUITE=%s ZZ_CU_TEST=%s\n' "$(q "$shim")" "$(q "$cu_suite")" "$(q "$cu_test")"
  for e in "${envs[@]}"; do printf 'export %s\n' "$(q "$e")"; done
  echo 'echo "@@ZZ_ISA_EMU_START@@"'
  printf '%s' "$(q "$prog")"
  for a in "$@"; do printf ' %s' "$(q "$a")"; done
  echo ' >/dev/ttyS1'
  # a newline first: the marker starts a line even after stderr without one
  echo 'printf "\n@@ZZ_ISA_EMU_EXIT %d@@\n" $?'
  echo ') </dev/null >/dev/ttyS0 2>&1'
  echo 'sleep 1'
  echo 'poweroff -f'
} >"$root/init"
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$run/initrd.gz"

# ---- boot disk: FAT with syslinux, kernel and initramfs ------------------------
# Bochs 2.7 reports the XSAVE area of PKRU and the compacted (XSAVEC/XSAVES) size
# wrongly in CPUID leaf 0xD, and Linux then turns XSAVE (so AVX and AVX-512) off:
# clearcpuid keeps those three out, leaving the standard XSAVE layout. Bochs 3.0
# keeps XSAVES (Linux ties XFD, so AMX, to it), but its SMM restore refuses
# CR4.LA57, so the kernel keeps 4-level paging (no5lvl). Its TSC
# counts one per instruction while the model's CPUID claims 2.4 GHz, so the
# kernel is told the rate the timers run at (ips).
ips=100000000
kopts="clearcpuid=pku,ospke,xsaves,xsavec,fsrm"
[ "$bochs3" = 0 ] || kopts="no5lvl clearcpuid=pku,ospke,fsrm"
cat >"$run/syslinux.cfg" <<EOF
DEFAULT linux
PROMPT 0
TIMEOUT 0
LABEL linux
  KERNEL vmlinuz
  INITRD initrd.gz
  APPEND console=ttyS0,115200 quiet nokaslr mitigations=off panic=-1 $kopts tsc_early_khz=$((ips / 1000))
EOF
cyl_bytes=$((16 * 63 * 512)) # Bochs's flat disk: 16 heads, 63 sectors per track
bytes=$(($(stat -c %s "$kernel") + $(stat -c %s "$run/initrd.gz") + 4 * 1048576))
cyls=$(((bytes + cyl_bytes - 1) / cyl_bytes))
truncate -s $((cyls * cyl_bytes)) "$run/disk.img"
mkfs.fat "$run/disk.img" >/dev/null || die "mkfs.fat failed on $run/disk.img"
mcopy -i "$run/disk.img" "$kernel" ::vmlinuz
mcopy -i "$run/disk.img" "$run/initrd.gz" ::initrd.gz
mcopy -i "$run/disk.img" "$run/syslinux.cfg" ::syslinux.cfg
syslinux --install "$run/disk.img" || die "syslinux --install failed on $run/disk.img"

cat >"$run/bochsrc" <<EOF
megs: $mem
romimage: file=/usr/share/bochs/BIOS-bochs-latest
vgaromimage: file=/usr/share/vgabios/vgabios.bin
cpu: model=$cpu, count=1, ips=$ips, reset_on_triple_fault=0
clock: sync=none, time0=local
ata0-master: type=disk, path=disk.img, mode=flat, cylinders=$cyls, heads=16, spt=63
boot: disk
com1: enabled=1, mode=file, dev=com1.log
com2: enabled=1, mode=file, dev=com2.log
display_library: rfb, options="timeout=0"
sound: driver=dummy
speaker: enabled=0
mouse: enabled=0
log: bochs.log
panic: action=fatal
error: action=ignore
info: action=ignore
debug: action=ignore
EOF
# Debian's bochs is built with its debugger, which waits for a command first
printf 'c\nquit\n' >"$run/debugger.rc"

# ---- run ---------------------------------------------------------------------
start=$(date +%s)
(cd "$run" && exec "$bochs" -q -f bochsrc -rc debugger.rc </dev/null >bochs.out 2>&1) &
bochs_pid=$!
status="" why=""
while :; do
  sleep 1
  now=$(date +%s)
  if [ -f "$run/com1.log" ] && grep -aq '@@ZZ_ISA_EMU_EXIT [0-9]*@@' "$run/com1.log"; then
    status=$(grep -ao '@@ZZ_ISA_EMU_EXIT [0-9]*@@' "$run/com1.log" | tail -1 | tr -dc 0-9)
    break
  fi
  if [ -f "$run/com1.log" ] && grep -aq 'Kernel panic' "$run/com1.log"; then
    sleep 2
    why="the guest kernel panicked"
    break
  fi
  if ! kill -0 "$bochs_pid" 2>/dev/null; then
    # the marker may have come just before Bochs powered off
    if grep -aq '@@ZZ_ISA_EMU_EXIT [0-9]*@@' "$run/com1.log" 2>/dev/null; then continue; fi
    why="Bochs ended before the program did"
    break
  fi
  if [ $((now - start)) -ge "$timeout_s" ]; then
    why="timeout after ${timeout_s}s"
    break
  fi
done
elapsed=$(($(date +%s) - start))
# the guest powers off; give Bochs a moment, then stop it
for _ in 1 2 3 4 5; do kill -0 "$bochs_pid" 2>/dev/null || break; sleep 1; done
kill "$bochs_pid" 2>/dev/null || true
wait "$bochs_pid" 2>/dev/null || true
bochs_pid=""

console=$run/com1.log
[ -f "$console" ] || : >"$console"
[ -f "$run/com2.log" ] && cat "$run/com2.log"
# stderr: what came on COM1 after the start marker's line, before the exit marker
if grep -aq '@@ZZ_ISA_EMU_START@@' "$console"; then
  awk 'BEGIN { RS = "\n"; ORS = "\n" }
       on && /^@@ZZ_ISA_EMU_EXIT [0-9]+@@/ { exit }
       on { lines[n++] = $0 }
       /@@ZZ_ISA_EMU_START@@/ { on = 1 }
       END { for (i = 0; i < n - 1; i++) print lines[i]; if (n) printf "%s", lines[n - 1] }' "$console" >&2
fi
[ "$boot_log" = 0 ] || { echo "isa_emu: guest console:" >&2; cat "$console" >&2; }
# the guest's AVX-512 and AMX flags as its kernel sees them
cpuline=$(grep -a -m1 '^@@ZZ_ISA_EMU_CPU' "$console" | grep -o -w -e 'avx512[a-z0-9_]*' -e 'amx[a-z0-9_]*' | tr '\n' ' ' || true)
# Bochs's debugger build prints its tick count (one per instruction, idle time
# skipped ahead) when it stops: the emulation rate, boot included
ticks=$(grep -ao '^([0-9])\.\[[0-9]*\]' "$run/bochs.out" 2>/dev/null | tail -1 | sed 's/.*\[0*\([0-9]*\)\]/\1/' || true)
rate=""
[ -z "$ticks" ] || [ "$elapsed" -eq 0 ] || rate=", $((ticks / 1000000)) M ticks, $((ticks / elapsed / 1000000)) M/s"
if [ -n "$status" ]; then
  echo "isa_emu: $cpu (${cpuline% }): exit $status after ${elapsed}s (boot included$rate)" >&2
  exit "$status"
fi
echo "isa_emu: $why ($cpu, ${elapsed}s); the guest console's last lines:" >&2
tail -n 20 "$console" | sed 's/^/  | /' >&2
grep -a 'PANIC\|>>' "$run/bochs.log" 2>/dev/null | tail -n 5 | sed 's/^/  bochs: /' >&2 || true
case "$why" in timeout*) exit 124 ;; *) exit 125 ;; esac
