#!/bin/sh
# netns_cluster.sh — N "hosts" on one machine for multi-host MPI tests: one network namespace
# per host, all joined by a bridge in a hub namespace, addresses 10.77.0.1 … 10.77.0.N, names
# h0 … h{N-1} in every host's /etc/hosts. Traffic stays inside these namespaces. Needs root.
# Adapted from shared/tools/netns-cluster.sh: every name carries a prefix ($ZZ_NETNS_PREFIX,
# default zzh, at most 8 characters) so that test runs side by side cannot collide, and the
# agent gives each host its own UTS namespace with hostname hI, so ranks see different hosts.
#
#   netns_cluster.sh up N        make the hosts (tears down an old set with the prefix first)
#   netns_cluster.sh down        remove them, ending every process still inside
#   netns_cluster.sh agent H CMD Open MPI's launch agent: runs CMD as host H (in its namespace)
#   netns_cluster.sh cut H       take host H's link down (a lost machine); `heal H` brings it back
#   netns_cluster.sh shape H RATE  a slow live link: H's traffic both ways through tc tbf at
#                                RATE (e.g. 256kbit); `unshape H` removes it
#
# Launch from host 0 (Open MPI 4.1.4: ranks land in their namespaces, MPI over TCP):
#   ZZ_NETNS_PREFIX=zt1 netns_cluster.sh up 2
#   ZZ_NETNS_PREFIX=zt1 netns_cluster.sh agent h0 mpirun --allow-run-as-root --host h0:1,h1:1 \
#     -np 2 --mca plm_rsh_agent "$PWD/netns_cluster.sh agent" --mca pml ob1 \
#     --mca btl self,tcp --mca btl_tcp_if_include 10.77.0.0/24 \
#     --mca oob_tcp_if_include 10.77.0.0/24 PROGRAM
set -eu
self=$(readlink -f "$0")
P=${ZZ_NETNS_PREFIX:-zzh}
case "${1:-}" in
up)
  n=${2:?number of hosts}
  "$self" down 2>/dev/null || true
  ip netns add "${P}hub"
  ip netns exec "${P}hub" ip link add "${P}br" type bridge
  ip netns exec "${P}hub" ip link set "${P}br" up
  i=0
  while [ "$i" -lt "$n" ]; do
    ip netns add "$P$i"
    ip link add "${P}v$i" type veth peer name "${P}p$i"
    ip link set "${P}v$i" netns "$P$i"
    ip link set "${P}p$i" netns "${P}hub"
    ip netns exec "${P}hub" ip link set "${P}p$i" master "${P}br" up
    ip netns exec "$P$i" ip addr add "10.77.0.$((i + 1))/24" dev "${P}v$i"
    ip netns exec "$P$i" ip link set "${P}v$i" up
    ip netns exec "$P$i" ip link set lo up
    mkdir -p "/etc/netns/$P$i"
    i=$((i + 1))
  done
  i=0
  while [ "$i" -lt "$n" ]; do
    { echo "127.0.0.1 localhost"; j=0; while [ "$j" -lt "$n" ]; do echo "10.77.0.$((j + 1)) h$j"; j=$((j + 1)); done; } >"/etc/netns/$P$i/hosts"
    i=$((i + 1))
  done
  echo "netns_cluster: $n hosts h0..h$((n - 1)) at 10.77.0.1..10.77.0.$n (prefix $P)"
  ;;
down)
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$P([0-9]+|hub)\$" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -CONT "$pid" 2>/dev/null || true; kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns"
    [ "$ns" = "${P}hub" ] || rm -rf "/etc/netns/$ns"
  done
  ;;
agent)
  h=$2; shift 2
  exec ip netns exec "$P${h#h}" unshare --uts sh -c "hostname $h && $*"
  ;;
cut)  ip netns exec "$P${2#h}" ip link set "${P}v${2#h}" down ;;
heal) ip netns exec "$P${2#h}" ip link set "${P}v${2#h}" up ;;
shape) # egress of both ends of H's veth: what H sends and what the bridge sends to H
  ip netns exec "$P${2#h}" tc qdisc replace dev "${P}v${2#h}" root tbf rate "$3" burst 4kb latency 200ms
  ip netns exec "${P}hub" tc qdisc replace dev "${P}p${2#h}" root tbf rate "$3" burst 4kb latency 200ms ;;
unshape)
  ip netns exec "$P${2#h}" tc qdisc del dev "${P}v${2#h}" root 2>/dev/null || true
  ip netns exec "${P}hub" tc qdisc del dev "${P}p${2#h}" root 2>/dev/null || true ;;
*) sed -n '2,23p' "$self"; exit 2 ;;
esac
