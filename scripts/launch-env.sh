# The environment of a two-node run, in one place: sourced by scripts/launch.sh,
# which prints `launch_env PROFILE SIDE` as KEY=VALUE lines into each
# command it starts. docs/LAUNCH.md explains each value; edit here, nowhere else.
#
# Profiles:
#   builtin  the built-in TCP transport over the data NICs
#   tcpx     Google's GPUDirect-TCPX plugin (A3-high: RxDM running on both nodes)
#
# Overrides from the caller's environment (launch.sh sets some from options):
#   LAUNCH_IFNAME      data interfaces, NCCL_SOCKET_IFNAME syntax (builtin: default
#                      each node's own, detected; A3-high: =eth1,eth2,eth3,eth4)
#   LAUNCH_IFNAME_SERVER / LAUNCH_IFNAME_CLIENT   the same, per side
#   LAUNCH_MAP         TPX_GPU_NIC_MAP for both sides (default: detected)
#   LAUNCH_MAP_SERVER / LAUNCH_MAP_CLIENT         the same, per side
#   LAUNCH_ALLOW_DIAL  TPX_ALLOW_DIAL (builtin): the peer's data-NIC addresses or
#                      CIDRs; the engine dials only its control address otherwise
#                      (docs/SECURITY.md), so set it when the data NICs differ
#   LAUNCH_CHUNK       engine chunk = TCPX's dynamic chunk size (524288)
#   LAUNCH_TCPX_LIB    directory of libnccl-net-tcpx.so (/usr/local/tcpx/lib64)
#   LAUNCH_ETCD        TPX_ETCD_ENDPOINTS: the sides find each other through etcd
#   LAUNCH_JOB         TPX_ETCD_JOB: the run's namespace there (docs/RENDEZVOUS.md)

# The tcpx profile's data NICs and control NIC: A3-high's, the only machines
# with RxDM (docs/TOPOLOGY.md). The builtin profile names none by default:
# each node's engine detects its own (TPX_SOCKET_IFNAME unset: NCCL's rule).
LAUNCH_DATA_NICS_DEFAULT="eth1,eth2,eth3,eth4"
LAUNCH_CTRL_NIC_DEFAULT="eth0"

launch_env() { # PROFILE SIDE(server|client)
  profile=$1
  side=$2
  chunk=${LAUNCH_CHUNK:-524288}
  if [ "$side" = server ]; then
    ifs=${LAUNCH_IFNAME_SERVER:-${LAUNCH_IFNAME:-}}
    map=${LAUNCH_MAP_SERVER:-${LAUNCH_MAP:-}}
  else
    ifs=${LAUNCH_IFNAME_CLIENT:-${LAUNCH_IFNAME:-}}
    map=${LAUNCH_MAP_CLIENT:-${LAUNCH_MAP:-}}
  fi
  echo "TPX_CHUNK_BYTES=$chunk"
  [ -n "$map" ] && echo "TPX_GPU_NIC_MAP=$map"
  if [ -n "${LAUNCH_ETCD:-}" ]; then
    echo "TPX_ETCD_ENDPOINTS=$LAUNCH_ETCD"
    echo "TPX_ETCD_JOB=${LAUNCH_JOB:-default}"
  fi
  case "$profile" in
  builtin)
    echo "TPX_NET_PLUGIN=builtin"
    # unset: every interface of the node that is up with an address, but lo,
    # docker* and virbr* (detected there, so any machine works as it is)
    if [ -n "$ifs" ]; then echo "TPX_SOCKET_IFNAME=$ifs"; fi
    # (an if: a false test as the function's last command would fail it)
    if [ -n "${LAUNCH_ALLOW_DIAL:-}" ]; then echo "TPX_ALLOW_DIAL=$LAUNCH_ALLOW_DIAL"; fi
    ;;
  tcpx)
    lib=${LAUNCH_TCPX_LIB:-/usr/local/tcpx/lib64}
    echo "TPX_NET_PLUGIN=tcpx"
    echo "LD_LIBRARY_PATH=$lib"
    # Read by the plugin itself (docs/CONFIG.md, last paragraph).
    echo "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=${ifs:-$LAUNCH_DATA_NICS_DEFAULT}"
    echo "NCCL_GPUDIRECTTCPX_CTRL_DEV=$LAUNCH_CTRL_NIC_DEFAULT"
    echo "NCCL_SOCKET_IFNAME=$LAUNCH_CTRL_NIC_DEFAULT"
    echo "NCCL_DYNAMIC_CHUNK_SIZE=$chunk"
    echo "NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX=/run/tcpx"
    echo "NCCL_NSOCKS_PERTHREAD=4"
    echo "NCCL_SOCKET_NTHREADS=1"
    ;;
  *)
    echo "launch-env: unknown profile '$profile' (builtin, tcpx)" >&2
    return 1
    ;;
  esac
  return 0 # not the status of the last optional line's test (LAUNCH_ALLOW_DIAL unset)
}
