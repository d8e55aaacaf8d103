#!/bin/bash
# Build one cell's CPython: extract the pristine tarball, copy in the
# version's additions, apply its quilt series with `patch -p1`, configure,
# make and install.  The rendered Dockerfile runs this inside the image; a
# packager (or the host-vs-container timing) can run it as is:
#
#   TARBALL=Python-3.13.5.tar.xz SRCDIR=Python-3.13.5 PREFIX=/opt/cpython \
#   CFLAGS="-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer" \
#   CONFIGURE_ARGS="--with-ensurepip=no" build-cpython.sh CONTEXT_DIR WORK_DIR
#
# CONTEXT_DIR holds the tarball, additions/ (a tree mirroring CPython's) and
# patches/ (series + patches); WORK_DIR is where the tree is extracted.
set -euo pipefail
ctx=$(cd "${1:?context dir}" && pwd)
work=${2:?work dir}
mkdir -p "$work" && cd "$work"
tar -xf "$ctx/$TARBALL"
cd "$SRCDIR"
if [ -d "$ctx/additions" ]; then
    echo ">>> copying additions: $(cd "$ctx/additions" && find . -type f | sort | tr '\n' ' ')"
    cp -R "$ctx/additions/." .
fi
if [ -f "$ctx/patches/series" ]; then
    sed -e 's/#.*//' "$ctx/patches/series" | while read -r patch _; do
        [ -n "$patch" ] || continue
        echo ">>> applying $patch"
        patch -p1 --forward --batch < "$ctx/patches/$patch"
    done
fi
echo ">>> configure --prefix=$PREFIX $CONFIGURE_ARGS CFLAGS=\"$CFLAGS\""
# shellcheck disable=SC2086  # CONFIGURE_ARGS is a list of options
./configure --prefix="$PREFIX" $CONFIGURE_ARGS CFLAGS="$CFLAGS"
echo ">>> make -j$(nproc)"
make -j"$(nproc)"
echo ">>> make install"
make install
