cases=("64M|--size 64M --iters 20" "64M cap256K|--size 64M --iters 20|X_SENDCAP=262144" "64M cap1M|--size 64M --iters 20|X_SENDCAP=1048576"
  "64M x4|--size 64M --iters 20 --inflight 4" "64M x4 cap256K|--size 64M --iters 20 --inflight 4|X_SENDCAP=262144" "64M x4 cap1M|--size 64M --iters 20 --inflight 4|X_SENDCAP=1048576")
source x/ab3.sh
