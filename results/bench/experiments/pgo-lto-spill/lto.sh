#!/bin/bash
# lto.sh SRC PROFILE_BUILD OUT: the `python` binary of SRC built with PGO + LTO as the 3.13-distro cell builds
# it (--enable-optimizations --with-lto, frame pointers), from the .gcda files profile.sh left in
# PROFILE_BUILD, out of tree in OUT (created anew).  SRC must be the tree profile.sh was given, at the same
# path: GCC refuses a profile whose source locations moved.  A change to a file's control flow needs its own
# profile.sh run (the compiler drops a function's profile when its CFG changed); a change that keeps every
# CFG (an attribute, another file's inlining) can reuse the profile.
set -eu
src=$(realpath "$1"); prof=$(realpath "$2"); out=$3
rm -rf "$out"; mkdir -p "$out"; cd "$out"
start=$(date +%s)
"$src/configure" -q --enable-optimizations --with-lto --with-ensurepip=no \
    CFLAGS="-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer" > configure.log 2>&1
(cd "$prof" && find . -name '*.gcda' -print0 | tar --null -T - -cf -) | tar -xf -
make -j"$(nproc)" python CFLAGS_NODIST="-fprofile-use -fprofile-correction -Wno-error=coverage-mismatch" \
    > make.log 2>&1
echo "python of $src in $out (PGO + LTO): $(( $(date +%s) - start )) s"
