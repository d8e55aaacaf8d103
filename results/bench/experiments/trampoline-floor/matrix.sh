#!/bin/sh
# matrix.sh PYTHON TAG -- all kinds x modes x two N; prints TAG kind mode n1 I1 n2 I2
# SPECS="KIND N1 N2 D;..." replaces the default four kinds (the 3.11 runs add meth and init)
PY=$1; TAG=$2
SPECS=${SPECS:-"gen 2000 22000 10;tree 5 45 10;coro 1000 11000 20;call 20000 220000 0"}
echo "$SPECS" | tr ';' '\n' | while read K N1 N2 D; do
  for M in off perf perf_jit; do
    I1=$(/w/bench/cg.sh $PY $TAG-$K-$M-1 $M $K $N1 $D)
    I2=$(/w/bench/cg.sh $PY $TAG-$K-$M-2 $M $K $N2 $D)
    echo "$TAG $K $M $D $N1 $I1 $N2 $I2"
  done
done
