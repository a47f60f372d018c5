#!/bin/sh
# tpx-info's GPU-NIC section against a fake sysfs tree made here: the
# built-in transport's one device (lo, TPX_SOCKET_IFNAME=lo) is given a PCI
# function on NUMA node 1, GPU 0 sits behind the same switch on node 1, GPU 1
# on node 0. Expect GPU 0 on lo through the switch, GPU 1 on lo with the
# cross-NUMA warning.
# usage: tpx_info_topo.sh TPX_INFO
set -eu
info=$1
root=$(mktemp -d /tmp/tpx-info-topo-XXXXXX)
trap 'rm -rf "$root"' EXIT
dev() { # dev PATH NUMA
  mkdir -p "$root/devices/$1"
  echo "$2" >"$root/devices/$1/numa_node"
}
sw=pci0000:80/0000:80:01.0/0000:82:00.0
dev "$sw/0000:83:00.0/0000:84:00.0" 1
dev "$sw/0000:83:02.0/0000:86:00.0" 1
dev pci0000:00/0000:00:01.0/0000:04:00.0 0
mkdir -p "$root/bus/pci/devices" "$root/class/net" "$root/devices/$sw/0000:83:02.0/0000:86:00.0/net/lo"
ln -s "../../../devices/$sw/0000:83:00.0/0000:84:00.0" "$root/bus/pci/devices/0000:84:00.0"
ln -s ../../../devices/pci0000:00/0000:00:01.0/0000:04:00.0 "$root/bus/pci/devices/0000:04:00.0"
ln -s ../../../0000:86:00.0 "$root/devices/$sw/0000:83:02.0/0000:86:00.0/net/lo/device"
ln -s "../../devices/$sw/0000:83:02.0/0000:86:00.0/net/lo" "$root/class/net/lo"
out=$("$info" --sysfs "$root" --gpu-bus-ids 0000:84:00.0,00000000:04:00.0)
echo "$out"
fail() { echo "tpx_info_topo: $1" >&2; exit 1; }
echo "$out" | grep -Eq '^nic lo +0000:86:00.0 +NUMA +1' || fail "lo's PCI function not shown"
echo "$out" | grep -Eq '^gpu 0 +0000:84:00.0 +NUMA +1 +-> lo +pci: .*behind bridge 0000:82:00.0' || fail "GPU 0 not on lo by PCI"
echo "$out" | grep -Eq '^gpu 1 +0000:04:00.0 +NUMA +0 +-> lo +any' || fail "GPU 1 not on lo"
echo "$out" | grep -q 'WARNING .*GPU 1 is on NUMA node 0 but its NIC lo on node 1' || fail "no cross-NUMA warning"
if echo "$out" | grep -q 'WARNING .*GPU 0 is on NUMA'; then fail "GPU 0 warned"; fi
echo "tpx_info_topo: ok"
