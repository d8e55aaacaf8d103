#!/bin/sh
# matrix.sh PYTHON TAG -- all kinds x modes x two N; prints TAG kind mode n1 I1 n2 I2
PY=$1; TAG=$2
for spec in "gen 2000 22000 10" "tree 5 45 10" "coro 1000 11000 20" "call 20000 220000 0"; do
  set -- $spec; K=$1; N1=$2; N2=$3; D=$4
  for M in off perf perf_jit; do
    I1=$(/w/bench/cg.sh $PY $TAG-$K-$M-1 $M $K $N1 $D)
    I2=$(/w/bench/cg.sh $PY $TAG-$K-$M-2 $M $K $N2 $D)
    echo "$TAG $K $M $D $N1 $I1 $N2 $I2"
  done
done
