"""remote_exec: the payload a stock 3.14+ interpreter runs, and how its answer is read back from a directory the
container controls (no Docker: the payload runs in a real child interpreter, the answer is read from files made
as a hostile container would; conformance/test_remote_activation.py switches a stock 3.14 and 3.15 for real)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cpython_perf.record import remote_exec
from cpython_perf.record.untrusted_files import Refused


def run_payload(tmp_path, mode: str, prelude: str = "") -> dict:
    """The payload run by a real interpreter (this one) as its __main__ would run it; its answer."""
    answer = tmp_path / "answer.json"
    code = prelude + remote_exec.payload_text(mode, str(answer)) + "\nassert '_cpython_perf_switch' not in globals()\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "answer.json.part").exists()
    return json.loads(answer.read_text())


def test_the_payload_answers_and_leaves_nothing_in_main(tmp_path):
    said = run_payload(tmp_path, "perf")
    if hasattr(sys, "activate_stack_trampoline") and sys.platform == "linux":
        assert said["state"] == "done" and said["active"] is True and said["was_active"] is False
    else:   # an interpreter without the trampoline (before 3.12): the failure is the answer, not a crash
        assert said["state"] == "failed" and "AttributeError" in said["message"]


@pytest.mark.skipif(not hasattr(sys, "activate_stack_trampoline"), reason="needs an interpreter with the trampoline")
def test_an_active_trampoline_is_not_activated_again(tmp_path):
    said = run_payload(tmp_path, "perf", "import sys\nsys.activate_stack_trampoline('perf')\n")
    assert said["was_active"] is True and said["active"] is True and "gh-146522" in said["message"]


def test_mode_and_path_are_quoted_not_pasted():
    text = remote_exec.payload_text("perf", "/tmp/x'); import os; os.system('true'); ('.json")
    compile(text, "payload", "exec")
    assert "_cpython_perf_switch('perf', \"/tmp/x'); import os" in text


def answer_dir(tmp_path):
    return os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)


def test_the_answer_is_read_only_from_a_regular_file_of_the_expected_shape(tmp_path):
    fd = answer_dir(tmp_path)
    try:
        assert remote_exec._read_answer(fd, "absent.json") is None
        (tmp_path / "ok.json").write_text(json.dumps({"state": "done", "active": True, "message": "ok\x1b[2J"}))
        got = remote_exec._read_answer(fd, "ok.json")
        assert got["state"] == "done" and got["active"] is True and got["was_active"] is False
        assert got["message"].startswith("ok") and "\x1b" not in got["message"]
        (tmp_path / "secret").write_text(json.dumps({"state": "done", "active": True}))
        os.symlink(tmp_path / "secret", tmp_path / "link.json")
        os.mkfifo(tmp_path / "fifo.json")
        (tmp_path / "big.json").write_bytes(b" " * (remote_exec.ANSWER_LIMIT + 1))
        (tmp_path / "odd.json").write_text(json.dumps({"state": "maybe", "active": 1}))
        (tmp_path / "junk.json").write_text("{not json")
        for name in ("link.json", "fifo.json", "big.json", "odd.json", "junk.json"):
            with pytest.raises(Refused):
                remote_exec._read_answer(fd, name)
    finally:
        os.close(fd)
