#!/bin/sh
# cg.sh PYTHON OUT MODE KIND N D  -- one callgrind run inside the container; OUT under /w/out
set -e
PY=$1; OUT=$2; MODE=$3; shift 3
mkdir -p /w/out; cd /tmp
case "$MODE" in off) X="";; perf) X="-X perf";; perf_jit) X="-X perf_jit";; esac
PYTHONHASHSEED=0 valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file=/w/out/$OUT.cg \
  $PY -E -S $X /w/bench/micro.py "$@" 2>/w/out/$OUT.log
grep -o "summary: [0-9]*" /w/out/$OUT.cg | cut -d' ' -f2
