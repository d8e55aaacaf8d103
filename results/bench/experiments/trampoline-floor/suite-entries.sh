#!/bin/sh
# suite-entries.sh PYTHON -- each suite benchmark once under callgrind (call graph only) with -X perf, then
# entries.py: which frames the trampoline's evaluator entered, by caller (loops: deltablue 4, others 1)
mkdir -p /w/out/suite; cd /tmp
for b in coroutines generators deltablue go json_dumps nbody raytrace richards; do
  L=1; [ $b = deltablue ] && L=4
  PYTHONHASHSEED=0 PYTHONPATH=/w/suite valgrind --tool=callgrind --callgrind-out-file=/w/out/suite/$b.cg \
    $1 -X perf -u /w/suite/bm_$b/run_benchmark.py --worker --loops $L --warmups 0 --values 1 \
    >/w/out/suite/$b.log 2>&1
  echo "$b loops=$L rc=$? $(grep -o 'summary: [0-9]*' /w/out/suite/$b.cg)"
done
