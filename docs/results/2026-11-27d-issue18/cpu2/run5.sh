cases=()
for s in 1M 4M 64M 256M; do
  it=20; [ $s = 256M ] && it=5; [ $s = 1M ] && it=200; [ $s = 4M ] && it=100
  for c in 512K auto; do cases+=("$s $c|--size $s --iters $it|TPX_CHUNK_BYTES=$c"); done
done
for c in 512K auto; do cases+=("64M x4 $c|--size 64M --iters 20 --inflight 4|TPX_CHUNK_BYTES=$c"); done
for kv in "64K 1000" "16K 256"; do set -- $kv
  for c in 512K auto; do cases+=("kv$1x$2 $c|--block-size $1 --batch $2 --iters 20|TPX_CHUNK_BYTES=$c"); done
done
source x/ab3.sh
