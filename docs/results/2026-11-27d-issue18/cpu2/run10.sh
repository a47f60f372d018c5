cases=("2x1|--size 64M --iters 20" "1x2|--size 64M --iters 20|TPX_NUM_CHANNELS=1" "1x2 split|--size 64M --iters 20|TPX_NUM_CHANNELS=1|X_SPLIT=1" "2x1 x4|--size 64M --iters 20 --inflight 4" "1x2 split x4|--size 64M --iters 20 --inflight 4|TPX_NUM_CHANNELS=1|X_SPLIT=1")
source x/ab3.sh
