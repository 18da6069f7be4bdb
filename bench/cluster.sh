#!/bin/sh
# cluster.sh — an emulated cluster of N same-size machines on this host, to try a
# cluster layout before renting it (docs/cluster.md). Each machine mI is
#   - a network namespace (zcID-I, with its own hostname mI) on a bridge, 10.78.0.(I+1),
#     its link shaped with tc tbf (both directions) to LINK;
#   - cgroups of its own: a CPU quota of CPUS cores (cfs_quota_us / cpu.max) pinned to
#     a cpuset, a memory limit MEM, and the offload directory's block device
#     throttled to DISK_READ / DISK_WRITE bytes/s (blkio / io.max; O_DIRECT I/O,
#     which the disk tier uses, is what a throttle sees).
# Every process of a machine — orted, its ranks, anything `exec` starts — runs inside
# its groups and namespace. mpirun itself runs in a launcher namespace (zcID-l,
# 10.78.0.254) outside every machine, as on a login node, so each machine's ranks
# are started by its own orted. cgroup v1 (cpu, cpuset, memory, blkio) or v2
# (cpu, cpuset, memory, io) — whichever this host mounts. Needs root.
#
#   cluster.sh up N              make machines m0..m{N-1} (tears down an old set of this
#                                ID first)
#   cluster.sh down              remove them, ending every process inside (this ID's only)
#   cluster.sh exec I CMD...     run CMD on machine mI (e.g. zigzag profile)
#   cluster.sh mpirun N ARGS...  mpirun over m0..m{N-1} from the launcher: ARGS as for mpirun
#                                (-np N and the host list are added), e.g. zigzag bench ...
#   cluster.sh run N CMD...      up N, run CMD (it may call `$ZZ_CLUSTER exec|mpirun`),
#                                down on exit, on Ctrl-C and on kill
#   cluster.sh agent mI CMD      Open MPI's launch agent (plm_rsh_agent); used by mpirun
#   cluster.sh status            the machines and their limits
#
# Each cluster is a run of its own, named by ID (ZZ_CLUSTER_ID: 1 to 8 of a-z 0-9):
# its namespaces, links, cgroups (zzcluster-ID) and state (/run/zz-cluster.ID.state)
# carry it, so clusters side by side never touch each other's machines. up and run
# without ZZ_CLUSTER_ID take their process id (run exports it to CMD; up says it);
# the other commands without it take the one cluster that is up, and refuse to
# guess among several.
#
# Sizes (environment, read by `up`): CPUS=0.4 (cores of quota per machine), CPUSET
# (space-separated CPU of each machine; default machine I on the I-th CPU of this
# process's cpuset, round robin), MEM=2G, DISK_READ=300M, DISK_WRITE=200M (bytes/s; 0:
# none), LINK=1gbit (tc rate; 0: none), OFFLOAD_DIR=${TMPDIR:-/tmp} (the directory
# whose block device is throttled).
set -eu
self=$(readlink -f "$0")
NET=10.78.0

die() { echo "cluster.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (network namespaces, cgroups and tc): run it as root, e.g. sudo $0 $*"

# The run's ID: ZZ_CLUSTER_ID; else for up and run this process's id; else the one
# cluster up (none: empty, for down and status to say so).
ID=${ZZ_CLUSTER_ID:-}
if [ -z "$ID" ]; then
  case "${1:-}" in
  up | run) ID=$$ ;;
  down | status | exec | mpirun | agent)
    ids=$(for f in /run/zz-cluster.*.state; do [ -e "$f" ] && basename "$f" .state | sed 's/^zz-cluster\.//'; done)
    count=$(echo "$ids" | grep -c . || true)
    [ "$count" -le 1 ] || die "$count clusters are up ($(echo "$ids" | tr "\n" " " | sed "s/ $//")): say which with ZZ_CLUSTER_ID=ID"
    ID=$ids ;;
  esac
fi
case "$ID" in *[!a-z0-9]*) die "ZZ_CLUSTER_ID=$ID: want 1 to 8 of a-z and 0-9" ;; esac
[ "${#ID}" -le 8 ] || die "ZZ_CLUSTER_ID=$ID: want 1 to 8 of a-z and 0-9"
export ZZ_CLUSTER_ID="$ID"
# every name of this run: namespaces $P0.., ${P}l (launcher), ${P}hub; links ${P}v0.. and
# ${P}p0.. (at most 15 characters: zc + 8 + - + v + 3 digits), cgroups, state
P=zc$ID-
CGNAME=zzcluster-$ID
STATE=/run/zz-cluster.$ID.state

# cgroup version: v1 when its cpu hierarchy is mounted, else v2 with the controllers
cg_version() {
  if [ -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then echo 1
  elif [ -e /sys/fs/cgroup/cgroup.controllers ]; then echo 2
  else die "no cgroup v1 cpu hierarchy nor cgroup v2 at /sys/fs/cgroup"; fi
}
# bytes from 2G / 300M / 1024 (powers of 1024)
bytes() {
  case "$1" in
  *[Gg]) echo $(( ${1%?} * 1073741824 )) ;; *[Mm]) echo $(( ${1%?} * 1048576 )) ;;
  *[Kk]) echo $(( ${1%?} * 1024 )) ;; *) echo "$1" ;;
  esac
}
# the cgroup directories of machine I (one per v1 controller, or the v2 one)
cg_dirs() {
  if [ "$(cg_version)" = 1 ]; then
    for c in cpu cpuset memory blkio; do echo "/sys/fs/cgroup/$c/$CGNAME/m$1"; done
  else echo "/sys/fs/cgroup/$CGNAME/m$1"; fi
}
# moves process $2 into machine $1's groups
cg_join() {
  for d in $(cg_dirs "$1"); do echo "$2" >"$d/cgroup.procs"; done
}

# Host $1 of this run on the bridge: namespace $P$1, its end ${P}v$1 of a link
# whose other end ${P}p$1 is on the hub's bridge, address $2; the link shaped both
# ways to tc rate $3 (0: not shaped); /etc/netns/$P$1 for its hosts file.
on_bridge() {
  ns=$P$1 me=${P}v$1 hubside=${P}p$1
  ip netns add "$ns"
  ip link add "$me" type veth peer name "$hubside"
  ip link set "$me" netns "$ns"
  ip link set "$hubside" netns "${P}hub"
  ip netns exec "${P}hub" ip link set "$hubside" master "${P}br" up
  ip netns exec "$ns" ip addr add "$2/24" dev "$me"
  ip netns exec "$ns" ip link set "$me" up
  ip netns exec "$ns" ip link set lo up
  if [ "$3" != 0 ]; then # what the host sends, and what the bridge sends to it
    ip netns exec "$ns" tc qdisc replace dev "$me" root tbf rate "$3" burst 1mb latency 50ms
    ip netns exec "${P}hub" tc qdisc replace dev "$hubside" root tbf rate "$3" burst 1mb latency 50ms
  fi
  mkdir -p "/etc/netns/$ns"
}

up() {
  n=${1:?number of machines}
  [ "$n" -ge 1 ] 2>/dev/null || die "up: want a number of machines >= 1, not '$n'"
  "$self" down 2>/dev/null || true # this ID's old set only
  cpus=${CPUS:-0.4} mem=$(bytes "${MEM:-2G}") rd=$(bytes "${DISK_READ:-300M}") wr=$(bytes "${DISK_WRITE:-200M}")
  link=${LINK:-1gbit} dir=${OFFLOAD_DIR:-${TMPDIR:-/tmp}}
  quota=$(awk -v c="$cpus" 'BEGIN { printf "%d", c * 100000 }')
  [ "$quota" -ge 1000 ] || die "up: CPUS=$cpus: want at least 0.01 core"
  dev=$(findmnt -no MAJ:MIN -T "$dir" 2>/dev/null | head -n 1 | tr -d ' ')
  case "$dev" in *:*) ;; *) echo "cluster.sh: $dir is on no block device ($dev): its disk is not throttled" >&2; dev="" ;; esac
  case "$dev" in 0:*) echo "cluster.sh: $dir is on a virtual file system ($dev): its disk is not throttled" >&2; dev="" ;; esac
  v=$(cg_version)
  # the CPUs this process may use, one per machine round robin unless CPUSET says
  if [ "$v" = 1 ]; then all=$(cat /sys/fs/cgroup/cpuset/cpuset.effective_cpus); else all=$(cat /sys/fs/cgroup/cpuset.cpus.effective 2>/dev/null || cat /sys/devices/system/cpu/online); fi
  list=$(echo "$all" | tr ',' '\n' | awk -F- '{ if (NF == 2) for (i = $1; i <= $2; i++) print i; else print $1 }')
  ncpu=$(echo "$list" | wc -l)
  if [ "$v" = 1 ]; then
    for c in cpu cpuset memory blkio; do mkdir -p "/sys/fs/cgroup/$c/$CGNAME"; done
    cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/$CGNAME/cpuset.cpus"
    cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/$CGNAME/cpuset.mems"
  else
    echo "+cpu +cpuset +memory +io" >/sys/fs/cgroup/cgroup.subtree_control
    mkdir -p "/sys/fs/cgroup/$CGNAME"
    echo "+cpu +cpuset +memory +io" >"/sys/fs/cgroup/$CGNAME/cgroup.subtree_control"
  fi
  # the state first: a failed up leaves what down needs to find this run's pieces
  echo "n=$n (coming up)" >"$STATE"
  hub=${P}hub
  ip netns add "$hub"
  ip netns exec "$hub" ip link add "${P}br" type bridge
  ip netns exec "$hub" ip link set "${P}br" up
  # the launcher: mpirun's namespace, on the bridge, in no machine
  on_bridge l "$NET.254" 0
  i=0
  while [ "$i" -lt "$n" ]; do
    on_bridge "$i" "$NET.$((i + 1))" "$link"
    cpu=$(echo "${CPUSET:-}" | awk -v i="$i" '{ print $(i + 1) }')
    [ -n "$cpu" ] || cpu=$(echo "$list" | sed -n "$((i % ncpu + 1))p")
    if [ "$v" = 1 ]; then
      for c in cpu cpuset memory blkio; do mkdir -p "/sys/fs/cgroup/$c/$CGNAME/m$i"; done
      g=/sys/fs/cgroup
      echo 100000 >"$g/cpu/$CGNAME/m$i/cpu.cfs_period_us"
      echo "$quota" >"$g/cpu/$CGNAME/m$i/cpu.cfs_quota_us"
      echo "$cpu" >"$g/cpuset/$CGNAME/m$i/cpuset.cpus"
      cat "$g/cpuset/$CGNAME/cpuset.mems" >"$g/cpuset/$CGNAME/m$i/cpuset.mems"
      echo "$mem" >"$g/memory/$CGNAME/m$i/memory.limit_in_bytes"
      [ -e "$g/memory/$CGNAME/m$i/memory.memsw.limit_in_bytes" ] && echo "$mem" >"$g/memory/$CGNAME/m$i/memory.memsw.limit_in_bytes"
      if [ -n "$dev" ]; then
        [ "$rd" != 0 ] && echo "$dev $rd" >"$g/blkio/$CGNAME/m$i/blkio.throttle.read_bps_device"
        [ "$wr" != 0 ] && echo "$dev $wr" >"$g/blkio/$CGNAME/m$i/blkio.throttle.write_bps_device"
      fi
    else
      d=/sys/fs/cgroup/$CGNAME/m$i
      mkdir -p "$d"
      echo "$quota 100000" >"$d/cpu.max"
      echo "$cpu" >"$d/cpuset.cpus"
      echo "$mem" >"$d/memory.max"
      [ -e "$d/memory.swap.max" ] && echo 0 >"$d/memory.swap.max"
      if [ -n "$dev" ]; then
        io="$dev"
        [ "$rd" != 0 ] && io="$io rbps=$rd"
        [ "$wr" != 0 ] && io="$io wbps=$wr"
        echo "$io" >"$d/io.max"
      fi
    fi
    i=$((i + 1))
  done
  for ns in "${P}l" $(i=0; while [ "$i" -lt "$n" ]; do echo "$P$i"; i=$((i + 1)); done); do
    { echo "127.0.0.1 localhost"; echo "$NET.254 launcher"; j=0
      while [ "$j" -lt "$n" ]; do echo "$NET.$((j + 1)) m$j"; j=$((j + 1)); done; } >"/etc/netns/$ns/hosts"
  done
  echo "id=$ID n=$n cpus=$cpus mem=$mem rd=$rd wr=$wr dev=$dev link=$link v=$v" >"$STATE"
  echo "cluster.sh: cluster $ID (ZZ_CLUSTER_ID=$ID for exec, mpirun, status, down): $n machine(s) m0..m$((n - 1)) at $NET.1..$NET.$n: $cpus CPU each (cgroup v$v), memory $(( mem / 1048576 )) MiB, disk ${dev:-none} read $(( rd / 1048576 )) MiB/s write $(( wr / 1048576 )) MiB/s, link $link"
}

# this run's namespaces
run_netns() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$P([0-9]+|l|hub)\$" || true; }

down() {
  [ -n "$ID" ] || { echo "cluster.sh: no cluster is up"; return 0; }
  # every process of this run's machines first (frozen ones woken to die), then its groups
  for ns in $(run_netns); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -CONT "$pid" 2>/dev/null || true; kill -KILL "$pid" 2>/dev/null || true; done
  done
  for base in /sys/fs/cgroup/cpu /sys/fs/cgroup/cpuset /sys/fs/cgroup/memory /sys/fs/cgroup/blkio /sys/fs/cgroup; do
    [ -d "$base/$CGNAME" ] || continue
    for d in "$base/$CGNAME"/m*; do
      [ -d "$d" ] || continue
      for pid in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
      k=0
      while ! rmdir "$d" 2>/dev/null && [ "$k" -lt 50 ]; do sleep 0.1; k=$((k + 1)); done
    done
    rmdir "$base/$CGNAME" 2>/dev/null || true
  done
  for ns in $(run_netns); do
    ip netns del "$ns"
    rm -rf "/etc/netns/$ns"
  done
  rm -f "$STATE"
}

# Enters network namespace $1 as host $2 and runs the shell line $3. Not `ip netns
# exec`: it mounts a fresh /sys, which hides /sys/fs/cgroup, and zigzag inside a
# machine reads its limits there (runtime/limits.c); the namespace's hosts file is
# bound over /etc/hosts in a private mount namespace instead.
in_ns() {
  exec nsenter --net="/run/netns/$1" unshare --uts --mount sh -c "mount --bind /etc/netns/$1/hosts /etc/hosts && hostname $2 && $3"
}

# machine I's namespace, hostname and groups for the calling process, then CMD
on_machine() {
  i=$1; shift
  [ -n "$ID" ] && [ -e "$STATE" ] && run_netns | grep -qx "$P$i" || die "no machine m$i (cluster.sh up N first)"
  cg_join "$i" $$
  exec nsenter --net="/run/netns/$P$i" unshare --uts --mount sh -c \
    'mount --bind "/etc/netns/$0/hosts" /etc/hosts && hostname "$1" && shift && exec "$@"' "$P$i" "m$i" "$@"
}

case "${1:-}" in
up) up "${2:-}" ;;
down) down ;;
status)
  [ -n "$ID" ] && [ -e "$STATE" ] && cat "$STATE" || echo "no cluster"
  [ -z "$ID" ] || run_netns ;;
exec)
  [ $# -ge 3 ] || die "exec I CMD...: a machine number and a command"
  i=$2; shift 2
  on_machine "$i" "$@" ;;
agent) # Open MPI joins the remote command into words: run them as one shell line
  h=$2; shift 2
  i=${h#m}
  cg_join "$i" $$
  in_ns "$P$i" "$h" "$*" ;;
mpirun)
  n=${2:?number of machines}; shift 2
  hosts=""
  i=0
  while [ "$i" -lt "$n" ]; do hosts="$hosts${hosts:+,}m$i:1"; i=$((i + 1)); done
  [ -n "$ID" ] && [ -e "$STATE" ] || die "no cluster (cluster.sh up N first)"
  # the agent mpirun starts inherits ZZ_CLUSTER_ID (exported above): it finds this run
  exec nsenter --net="/run/netns/${P}l" unshare --uts --mount sh -c \
    'mount --bind "/etc/netns/$0/hosts" /etc/hosts && hostname launcher && exec "$@"' "${P}l" mpirun --allow-run-as-root --host "$hosts" -np "$n" \
    --mca plm_rsh_agent "$self agent" --mca pml ob1 --mca btl self,tcp \
    --mca btl_tcp_if_include "$NET.0/24" --mca oob_tcp_if_include "$NET.0/24" --bind-to none \
    -x OPENBLAS_NUM_THREADS "$@" ;;
run)
  n=${2:?number of machines}; shift 2
  [ $# -ge 1 ] || die "run N CMD...: a command to run on the cluster"
  trap '"$self" down' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  up "$n"
  export ZZ_CLUSTER="$self"
  "$@" ;;
*) sed -n '2,38p' "$self"; exit 2 ;;
esac
