"""conformance/scripts/childcheck.py's build_shim, on this machine's C compiler and interpreter (no Docker).

A shim that breaks every process it is preloaded into (as check_concurrent_first_calls' slow-/tmp shim does on
glibc 2.31, Debian 11, where dlsym itself calls the calloc the shim is resolving) must not be used: the check
would otherwise report the interpreter as crashing when the shim crashes before the interpreter runs a line.
"""

from __future__ import annotations

import shutil
import sys

import pytest

from cpython_perf.matrix import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "conformance" / "scripts"))
import childcheck  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="no C compiler (cc) here to build a shim")

WORKING = r'''
#define _GNU_SOURCE
#include <dlfcn.h>
#include <unistd.h>
ssize_t write(int fd, const void *buf, size_t count)
{
    static ssize_t (*real_write)(int, const void *, size_t);
    if (real_write == NULL) real_write = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    return real_write(fd, buf, count);
}
'''

BROKEN = r'''
#include <signal.h>
__attribute__((constructor)) static void broken(void) { raise(SIGSEGV); }
'''


def test_a_shim_that_works_is_used(tmp_path):
    lib, why_not = childcheck.build_shim(WORKING, str(tmp_path), "working")
    assert why_not is None and lib.endswith("working.so")


def test_a_shim_that_breaks_a_plain_interpreter_is_not_used_and_says_why(tmp_path):
    lib, why_not = childcheck.build_shim(BROKEN, str(tmp_path), "broken")
    assert lib is None
    assert "breaks a plain" in why_not and "-c pass` here (killed by SIGSEGV)" in why_not, why_not
