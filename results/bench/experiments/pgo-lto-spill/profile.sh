#!/bin/bash
# profile.sh SRC BUILD: the training half of a PGO build of the CPython tree SRC, out of tree in BUILD
# (created anew): configure --enable-optimizations (no LTO), then `make profile-run-stamp`, which builds the
# instrumented interpreter and runs upstream's PROFILE_TASK with it.  BUILD keeps the .gcda files.
# Run it where the cell images are built (docker run ... cpython-perf-base:trixie-*), so that the compiler
# is the cells' GCC.
set -eu
src=$(realpath "$1"); build=$2
rm -rf "$build"; mkdir -p "$build"; cd "$build"
start=$(date +%s)
"$src/configure" -q --enable-optimizations --with-ensurepip=no \
    CFLAGS="-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer" > configure.log 2>&1
make -j"$(nproc)" profile-run-stamp > profile.log 2>&1
echo "profile of $src in $build: $(( $(date +%s) - start )) s"
