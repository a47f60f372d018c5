cases=()
for s in 1M 4M 16M 256M; do
  it=20; [ $s = 256M ] && it=5; [ $s = 1M ] && it=200; [ $s = 4M ] && it=100
  for c in 512K 2M; do cases+=("$s $c|--size $s --iters $it|TPX_CHUNK_BYTES=$c"); done
done
for kv in "64K 1000" "16K 256" "4K 1000"; do set -- $kv
  for c in 512K 2M; do cases+=("kv$1x$2 $c|--block-size $1 --batch $2 --iters 20|TPX_CHUNK_BYTES=$c"); done
done
source x/ab3.sh
