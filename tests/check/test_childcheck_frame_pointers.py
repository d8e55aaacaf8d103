"""conformance/scripts/childcheck.py's built_with_frame_pointers: which interpreters the check scripts that walk
frame pointers (perf record -g) can check, read from sysconfig's CFLAGS as the cell images record them.

A -O0 build keeps frame pointers without -fno-omit-frame-pointer in its flags: those checks run there too,
rather than being skipped as "not built with frame pointers".  The driver's own judgement of an interpreter's
flags (cpython_perf.check.external.cflags_frame_pointers) must agree on every case.
"""

from __future__ import annotations

import sys

import pytest

from cpython_perf.check import external
from cpython_perf.matrix import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "conformance" / "scripts"))
import childcheck  # noqa: E402


@pytest.mark.parametrize("cflags, expected", [
    # the 3.13-O0 image: configure's OPT first, the variant's -O0 last
    ("-fno-strict-overflow -Wsign-compare -DNDEBUG -g -O3 -Wall -O0 -O0", True),
    ("-fno-strict-overflow -Wsign-compare -DNDEBUG -g -O3 -Wall -fno-omit-frame-pointer "
     "-mno-omit-leaf-frame-pointer", True),
    ("-fno-strict-overflow -Wsign-compare -DNDEBUG -g -O3 -Wall", False),   # the release variant
    ("-O0 -Wall -O2", False),                                               # the last -O counts
    ("-O0 -fomit-frame-pointer", False),
    ("-fno-omit-frame-pointer -fomit-frame-pointer", False),                # the last of the pair counts
    ("-fomit-frame-pointer -fno-omit-frame-pointer", True),
    ("", False),
])
def test_built_with_frame_pointers(cflags, expected):
    assert childcheck.built_with_frame_pointers(cflags) is expected
    # the driver's judgement of an external interpreter (profile's default mode, the target facts) agrees;
    # it has no answer where sysconfig has no flags at all
    assert external.cflags_frame_pointers({"CFLAGS": cflags}) is (expected if cflags else None)


def test_a_recorded_program_that_fails_is_a_failure_not_a_reason_it_cannot_check(tmp_path):
    """perf record exits with the status of the program it ran: a program that raised (a RecursionError of a
    handler that ran nested) is a failure of the check, while perf that could not record is "cannot check"."""
    import subprocess

    data = tmp_path / "perf.data"
    data.write_bytes(b"PERFILE2")
    crashed = subprocess.CompletedProcess(["perf"], 1, "", "Traceback (most recent call last):\n  ...\n"
                                          "RecursionError: maximum recursion depth exceeded\n[ perf record: Woken up "
                                          "7 times to write data ]\n[ perf record: Captured and wrote 1.620 MB "
                                          f"{data} (3485 samples) ]\n")
    assert childcheck.recorded_program_failure(crashed, str(data)).startswith(
        "the recorded program failed (exit 1): ")
    assert "RecursionError" in childcheck.recorded_program_failure(crashed, str(data))
    assert childcheck.perf_record_failure(crashed, str(data)) is None
    denied = subprocess.CompletedProcess(["perf"], 255, "", "Error:\nAccess to performance monitoring and "
                                         "observability operations is limited.\n")
    assert childcheck.recorded_program_failure(denied, str(tmp_path / "none.data")) is None
    assert childcheck.perf_record_failure(denied, str(tmp_path / "none.data")).startswith("perf record failed here (255)")
    fine = subprocess.CompletedProcess(["perf"], 0, "done\n", f"[ perf record: Captured and wrote 1 MB {data} ]\n")
    assert childcheck.recorded_program_failure(fine, str(data)) is None and childcheck.perf_record_failure(fine, str(data)) is None
