#!/bin/bash
cd /work/main
for r in 1 2 3; do
  for v in old new; do
    b=build; [ $v = old ] && b=/tmp/old/build
    ROUNDS=2 bench/cpu_compare.sh $b > /tmp/cpucmp/$v-$r.txt 2>&1
    echo "$v $r rc=$?"
  done
done
