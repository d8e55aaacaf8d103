#!/bin/bash
# instructions.sh PYTHON...: cachegrind's instruction count (I refs) of each workload of workloads.py, with the
# trampoline inactive and with -X perf, less the count of `PYTHON -c pass` in the same mode (startup).  Run it
# in an image with valgrind (cpython-perf-valgrind:*), with the builds mounted where they were built.  String
# hashes are fixed (PYTHONHASHSEED=0): a random seed moves the counts by several percent.
set -eu
export PYTHONHASHSEED=0
here=$(dirname "$(realpath "$0")")
count() { valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" 2>&1 \
          | awk '/I *refs/ {gsub(",", "", $NF); print $NF}'; }
cd /tmp
for python in "$@"; do
  # A fresh build's first runs write the standard library's .pyc files: not counted.  Both kinds of run:
  # `-c` imports linecache (to keep the command's source for tracebacks), a script does not.
  "$python" "$here/workloads.py" loop > /dev/null
  "$python" -c pass
  for mode in inactive perf; do
    opt=(); [ "$mode" = perf ] && opt=(-X perf)
    base=$(count "$python" "${opt[@]}" -c pass)
    for workload in generators calls loop; do
      n=$(count "$python" "${opt[@]}" "$here/workloads.py" "$workload")
      echo "$python $mode $workload $((n - base))"
    done
  done
done
