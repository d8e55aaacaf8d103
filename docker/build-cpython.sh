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
#
# Reproducible: the same inputs and WORK_DIR give the same PREFIX tree, bit for
# bit, whatever the umask, locale, time zone, number of CPUs and time of the
# build (python -m cpython_perf reproducibility CELL checks it):
#   umask 022, LC_ALL=C, TZ=UTC   fixed here, whatever the caller's;
#   SOURCE_DATE_EPOCH             the release's date (the newest member of the
#                                 tarball) unless the caller sets one: GCC's
#                                 __DATE__/__TIME__ in sys.version, and .pyc
#                                 files checked by source hash, not by mtime;
#   PYTHONHASHSEED=0, -j1         the build's Python writes sets and frozensets
#                                 in .pyc files in one order (make install runs
#                                 compileall with the build's interpreter
#                                 without -E, which would ignore it; other
#                                 PYTHON* variables are unset), and in one
#                                 process: marshal's output depends on what
#                                 the process compiled before (reference
#                                 counts), so -j0's workers make other bytes;
#   mtimes                        every file the build and `make install` write
#                                 in PREFIX is dated SOURCE_DATE_EPOCH (setup.py
#                                 installs extension modules with their build
#                                 times).
# The build directory is recorded (sysconfig's abs_builddir, debug info), so
# it is part of the inputs: the image always builds in /usr/src/<SRCDIR>.
set -euo pipefail
umask 022
while read -r name; do unset "$name"; done < <(compgen -e | grep '^PYTHON' || true)
export LC_ALL=C TZ=UTC PYTHONHASHSEED=0
ctx=$(cd "${1:?context dir}" && pwd)
work=${2:?work dir}
mkdir -p "$work" && cd "$work"
tar -xf "$ctx/$TARBALL"
cd "$SRCDIR"
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
    # before anything is added or patched: the newest file of the pristine tree
    SOURCE_DATE_EPOCH=$(find . -type f -printf '%T@\n' | sort -n | tail -n 1 | cut -d. -f1)
fi
export SOURCE_DATE_EPOCH
echo ">>> SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH ($(date -u -d "@$SOURCE_DATE_EPOCH"))"
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
started=$(mktemp)   # what is newer than this in PREFIX at the end was written by this build
echo ">>> configure --prefix=$PREFIX $CONFIGURE_ARGS CFLAGS=\"$CFLAGS\""
# shellcheck disable=SC2086  # CONFIGURE_ARGS is a list of options
./configure --prefix="$PREFIX" $CONFIGURE_ARGS CFLAGS="$CFLAGS"
echo ">>> make -j$(nproc)"
make -j"$(nproc)"
install_args=()
# shellcheck disable=SC2016  # $(BUILDPYTHON) is make's
if grep -qxF 'PYTHON_FOR_BUILD=./$(BUILDPYTHON) -E' Makefile; then
    install_args+=('PYTHON_FOR_BUILD=./$(BUILDPYTHON)')   # compileall honours PYTHONHASHSEED
fi
if grep -q '^COMPILEALL_OPTS=' Makefile; then
    install_args+=('COMPILEALL_OPTS=-j1')
else   # before 3.12 the option is written in the compileall lines
    sed -i 's/^\(\t\t\)-j0 -d /\1-j1 -d /' Makefile
fi
echo ">>> make install ${install_args[*]}"
make install "${install_args[@]}"
# what the build and make install wrote (and only that) dated SOURCE_DATE_EPOCH
find "$PREFIX" -newer "$started" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +
rm -f "$started"
