"""Tests of the Linux perf profiler support.

The perf trampoline (-X perf, PYTHONPERFSUPPORT, /tmp/perf-PID.map) and its
jitdump backend (-X perf_jit, PYTHON_PERF_JIT_SUPPORT, /tmp/jit-PID.dump),
both reachable from sys.activate_stack_trampoline().

The test classes and methods carry the names of CPython 3.13's
Lib/test/test_perf_profiler.py, so that results read the same across
versions.  This module is added to 3.9 and 3.11 by the cpython-perf backport
series and runs unchanged on both (it only uses what test.support offered in
3.9).  Tests that need the perf tool are skipped, with the reason, when perf is
missing or not permitted (perf_event_paranoid, a container without
CAP_PERFMON); the others only need the interpreter.
"""

import os
import pathlib
import platform
import re
import struct
import subprocess
import sys
import sysconfig
import tempfile
import unittest
from test import support
from test.support import script_helper


if not sys.platform.startswith("linux"):
    raise unittest.SkipTest("perf profiler support exists on Linux only")

if not getattr(support, "has_subprocess_support", True):
    raise unittest.SkipTest("test module requires subprocess")


def _sanitized_build():
    # test.support.check_sanitizer() exists from 3.10 on; 3.9 gets the same
    # answer from the build flags.
    check = getattr(support, "check_sanitizer", None)
    if check is not None:
        return check(address=True, memory=True, ub=True)
    flags = " ".join(str(sysconfig.get_config_var(name) or "")
                     for name in ("CONFIG_ARGS", "PY_CFLAGS", "PY_CFLAGS_NODIST"))
    return ("-fsanitize=" in flags or "--with-address-sanitizer" in flags
            or "--with-memory-sanitizer" in flags
            or "--with-undefined-behavior-sanitizer" in flags)


if _sanitized_build():
    # gh-109580: the trampoline crashes at random under ASAN/MSAN/UBSAN.
    raise unittest.SkipTest("test crash randomly on ASAN/MSAN/UBSAN build")


def supports_trampoline_profiling():
    value = sysconfig.get_config_var("PY_HAVE_PERF_TRAMPOLINE")
    return bool(value) and int(value) == 1


if not supports_trampoline_profiling():
    raise unittest.SkipTest("perf trampoline profiling not supported")


def _bolt_optimized():
    check = getattr(support, "check_bolt_optimized", None)
    return bool(check and check())


# The perf map's lines: start address and size in hex (no 0x), then the name.
_MAP_LINE = re.compile(r"^([0-9a-fA-F]+) ([0-9a-fA-F]+) (.+)$")

# A script whose three nested functions get trampolines of their own.
_CHAIN = """if 1:
    def foo():
        pass

    def bar():
        foo()

    def baz():
        bar()

    baz()
"""

# The same chain, spending its time in foo so that perf samples it.
_BUSY_CHAIN = """if 1:
    def foo(n):
        x = 0
        for i in range(n):
            x += i

    def bar(n):
        foo(n)

    def baz(n):
        bar(n)

    baz(10000000)
"""


def _child_env(**extra):
    env = dict(os.environ)
    # Interpreters with the experimental JIT (3.13+) must run the eval loop.
    env["PYTHON_JIT"] = "0"
    for name in ("PYTHONPERFSUPPORT", "PYTHON_PERF_JIT_SUPPORT"):
        env.pop(name, None)
    env.update(extra)
    return env


def _run_python(*args, **env):
    """Run the interpreter under test; return (pid, returncode, stdout, stderr)."""
    with subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True,
                          env=_child_env(**env)) as process:
        stdout, stderr = process.communicate()
    return process.pid, process.returncode, stdout, stderr


class _CleansTmpFiles:
    """Removes the /tmp files a test made that match PATTERNS (and no others)."""

    PATTERNS = ("perf-*.map",)

    def _tmp_files(self):
        found = set()
        for pattern in self.PATTERNS:
            found.update(pathlib.Path("/tmp").glob(pattern))
        return found

    def setUp(self):
        super().setUp()
        self._tmp_before = self._tmp_files()

    def tearDown(self):
        for path in self._tmp_files() - self._tmp_before:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        super().tearDown()


def _map_names(path):
    """The names of a perf map file's entries; each line must be well formed."""
    names = []
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            match = _MAP_LINE.match(line.rstrip("\n"))
            if match is None:
                raise AssertionError(f"malformed line in {path}: {line!r}")
            names.append(match.group(3))
    return names


_JITDUMP_MAGIC = 0x4A695444
_JIT_CODE_LOAD = 0
_ELF_MACHINE = {"x86_64": 62, "aarch64": 183}


def _jitdump_names(path, pid):
    """The names of a jitdump file's code load records, after checking its header."""
    data = pathlib.Path(path).read_bytes()
    if len(data) < 40:
        raise AssertionError(f"{path}: {len(data)} bytes, shorter than a jitdump header")
    magic, version, header_size, machine, _pad, header_pid = struct.unpack_from("=6I", data, 0)
    if magic != _JITDUMP_MAGIC or version != 1:
        raise AssertionError(f"{path}: magic {magic:#x} version {version}, not a jitdump")
    if header_pid != pid:
        raise AssertionError(f"{path}: header names pid {header_pid}, not {pid}")
    expected_machine = _ELF_MACHINE.get(platform.machine())
    if expected_machine is not None and machine != expected_machine:
        raise AssertionError(f"{path}: ELF machine {machine}, expected {expected_machine}")
    names = []
    offset = header_size
    while offset < len(data):
        if offset + 16 > len(data):
            raise AssertionError(f"{path}: truncated record header at offset {offset}")
        record_id, record_size = struct.unpack_from("=2I", data, offset)
        if record_size < 16 or offset + record_size > len(data):
            raise AssertionError(f"{path}: record {record_id} of {record_size} bytes at offset {offset}")
        if record_id == _JIT_CODE_LOAD:
            name_start = offset + 16 + 40    # pid, tid (4 bytes each), vma, code_addr, code_size, code_index (8)
            name_end = data.index(b"\0", name_start, offset + record_size)
            names.append(data[name_start:name_end].decode("utf-8", "surrogateescape"))
        offset += record_size
    return names


class TestPerfTrampoline(_CleansTmpFiles, unittest.TestCase):
    """The trampoline and its perf map, without the perf tool."""

    PATTERNS = ("perf-*.map", "jit-*.dump")

    def run_script(self, code, *args, **env):
        with tempfile.TemporaryDirectory() as script_dir:
            script = script_helper.make_script(script_dir, "perftest", code)
            pid, rc, stdout, stderr = _run_python(*args, script, **env)
        return script, pid, rc, stdout, stderr

    def assert_symbols(self, names, script, functions, source):
        from_script = [name for name in names if name.endswith(f":{script}")]
        for function in functions:
            if f"py::{function}:{script}" not in names:
                self.fail(f"no entry py::{function}:{script} in {source}: {len(names)} entries, "
                          f"of the script: {from_script}")

    @unittest.skipIf(_bolt_optimized(), "fails on BOLT instrumented binaries")
    def test_trampoline_works(self):
        script, pid, rc, stdout, stderr = self.run_script(_CHAIN, "-Xperf")
        self.assertEqual((rc, stdout, stderr), (0, "", ""))
        perf_file = pathlib.Path(f"/tmp/perf-{pid}.map")
        self.assertTrue(perf_file.exists(), f"{perf_file} was not written")
        # _map_names() also checks every address: bare hex, no 0x prefix
        names = _map_names(perf_file)
        self.assert_symbols(names, script, ("foo", "bar", "baz"), perf_file)

    @unittest.skipIf(_bolt_optimized(), "fails on BOLT instrumented binaries")
    def test_trampoline_works_with_forks(self):
        code = """if 1:
            import os, sys

            def foo_fork():
                pass

            def bar_fork():
                foo_fork()

            def baz_fork():
                bar_fork()

            def foo():
                child = os.fork()
                if child == 0:
                    print(os.getpid())
                    baz_fork()
                else:
                    _, status = os.waitpid(child, 0)
                    sys.exit(status)

            def bar():
                foo()

            def baz():
                bar()

            baz()
        """
        script, pid, rc, stdout, stderr = self.run_script(code, "-Xperf")
        self.assertEqual(rc, 0, stderr)
        self.assertEqual(stderr, "")
        child_pid = int(stdout.strip())
        parent_map = pathlib.Path(f"/tmp/perf-{pid}.map")
        child_map = pathlib.Path(f"/tmp/perf-{child_pid}.map")
        self.assertTrue(parent_map.exists(), f"{parent_map} was not written")
        self.assertTrue(child_map.exists(), f"{child_map} was not written by the forked child")
        self.assert_symbols(_map_names(parent_map), script, ("foo", "bar", "baz"), parent_map)
        self.assert_symbols(_map_names(child_map), script, ("foo_fork", "bar_fork", "baz_fork"),
                            child_map)

    @unittest.skipIf(_bolt_optimized(), "fails on BOLT instrumented binaries")
    def test_sys_api(self):
        code = """if 1:
            import sys

            def foo():
                pass

            def spam():
                pass

            def bar():
                sys.deactivate_stack_trampoline()
                foo()
                sys.activate_stack_trampoline("perf")
                spam()

            def baz():
                bar()

            sys.activate_stack_trampoline("perf")
            baz()
        """
        script, pid, rc, stdout, stderr = self.run_script(code)
        self.assertEqual((rc, stdout, stderr), (0, "", ""))
        perf_file = pathlib.Path(f"/tmp/perf-{pid}.map")
        self.assertTrue(perf_file.exists(), f"{perf_file} was not written")
        names = _map_names(perf_file)
        # foo() ran only while the trampoline was off
        self.assertNotIn(f"py::foo:{script}", names)
        self.assert_symbols(names, script, ("spam", "bar", "baz"), perf_file)

    def test_sys_api_with_existing_trampoline(self):
        code = """if 1:
            import sys
            sys.activate_stack_trampoline("perf")
            sys.activate_stack_trampoline("perf")
        """
        script_helper.assert_python_ok("-c", code, PYTHON_JIT="0")

    def test_sys_api_with_invalid_trampoline(self):
        code = """if 1:
            import sys
            sys.activate_stack_trampoline("invalid")
        """
        rc, out, err = script_helper.assert_python_failure("-c", code, PYTHON_JIT="0")
        self.assertIn("invalid backend: invalid", err.decode())

    def test_sys_api_get_status(self):
        code = """if 1:
            import sys
            sys.activate_stack_trampoline("perf")
            assert sys.is_stack_trampoline_active() is True
            sys.deactivate_stack_trampoline()
            assert sys.is_stack_trampoline_active() is False
        """
        script_helper.assert_python_ok("-c", code, PYTHON_JIT="0")

    def test_sys_api_under_eval_frame_hook(self):
        # A PEP 523 evaluator installed before the activation keeps running
        # under the trampoline and is back after it (as in CPython 3.15).
        try:
            import _testinternalcapi
        except ImportError:
            self.skipTest("requires _testinternalcapi")
        if not hasattr(_testinternalcapi, "set_eval_frame_record"):
            self.skipTest("_testinternalcapi has no set_eval_frame_record")
        code = """if 1:
            import os, sys, _testinternalcapi
            def under_hook():
                pass
            def after_deactivation():
                pass
            seen = []
            # The evaluator is installed before any activation: a trampoline
            # an inherited PYTHONPERFSUPPORT started is stopped first.
            sys.deactivate_stack_trampoline()
            _testinternalcapi.set_eval_frame_record(seen)
            sys.activate_stack_trampoline("perf")
            assert sys.is_stack_trampoline_active()
            under_hook()
            sys.deactivate_stack_trampoline()
            assert not sys.is_stack_trampoline_active()
            after_deactivation()
            _testinternalcapi.set_eval_frame_default()
            assert "under_hook" in seen, seen
            assert "after_deactivation" in seen, seen
            print(os.getpid())
        """
        rc, out, err = script_helper.assert_python_ok("-c", code, PYTHON_JIT="0")
        self.assertEqual(err, b"")
        perf_file = pathlib.Path(f"/tmp/perf-{int(out)}.map")
        self.addCleanup(lambda: perf_file.exists() and perf_file.unlink())
        contents = perf_file.read_text()
        self.assertIn("py::under_hook:", contents)
        self.assertNotIn("py::after_deactivation:", contents)

    def test_args_from_interpreter_flags_follow_the_trampoline(self):
        # The options a child is started with name the backend in use now
        # (a difference from upstream, where -X perf is not passed on).
        code = """if 1:
            import os, subprocess, sys
            print(os.getpid())
            def flags():
                args = subprocess._args_from_interpreter_flags()
                return [args[i + 1] for i, arg in enumerate(args[:-1])
                        if arg == "-X" and args[i + 1] in ("perf", "perf_jit")]
            print(sys._stack_trampoline_backend(), flags())
            sys.activate_stack_trampoline("perf_jit")
            print(sys._stack_trampoline_backend(), flags())
            sys.deactivate_stack_trampoline()
            print(sys._stack_trampoline_backend(), flags())
            sys.activate_stack_trampoline("perf")
            print(sys._stack_trampoline_backend(), flags())
        """
        pid, rc, stdout, stderr = _run_python("-X", "perf", "-c", code)
        self.assertEqual((rc, stderr), (0, ""))
        self.assertEqual(stdout.splitlines()[1:],
                         ["perf ['perf']", "perf_jit ['perf_jit']", "None []",
                          "perf ['perf']"])

    def test_multiprocessing_children_run_the_parents_backend(self):
        # spawn and forkserver start new interpreters with the parent's
        # options: they run the backend the parent runs when they start.
        # (Where the platform has no working sem_open, there is no Pool.)
        import_module = getattr(support, "import_module", None)
        if import_module is None:   # 3.10+: test.support.import_helper
            from test.support.import_helper import import_module
        import_module("multiprocessing.synchronize")
        code = """if 1:
            import multiprocessing, os, sys

            def state():
                return os.getpid(), sys._stack_trampoline_backend()

            if __name__ == "__main__":
                if len(sys.argv) > 1:
                    sys.activate_stack_trampoline(sys.argv[1])
                for method in ("spawn", "forkserver"):
                    context = multiprocessing.get_context(method)
                    with context.Pool(1) as pool:
                        print(method, *pool.apply(state))
                sys.deactivate_stack_trampoline()
                with multiprocessing.get_context("spawn").Pool(1) as pool:
                    print("deactivated", *pool.apply(state))
        """
        with tempfile.TemporaryDirectory() as script_dir:
            script = script_helper.make_script(script_dir, "perfmp", code)
            for options, backend in ((["-X", "perf"], "perf"),
                                     (["-X", "perf_jit"], "perf_jit"),
                                     ([], "perf_jit")):
                args = [*options, script] if options else [script, backend]
                with self.subTest(options=options, backend=backend):
                    pid, rc, stdout, stderr = _run_python(*args)
                    self.assertEqual((rc, stderr), (0, ""))
                    lines = [line.split() for line in stdout.splitlines()]
                    self.assertEqual([(m, b) for m, _, b in lines],
                                     [("spawn", backend), ("forkserver", backend),
                                      ("deactivated", "None")])
                    for method, child, child_backend in lines[:2]:
                        written = pathlib.Path(f"/tmp/perf-{child}.map" if backend == "perf"
                                               else f"/tmp/jit-{child}.dump")
                        self.assertTrue(written.exists(), written)

    # The rest is what 3.13 provides and its test suite checks elsewhere
    # (test_sys, test_embed, test_cmd_line): the other ways to turn the
    # trampoline on and the perf_jit backend's output.

    def test_sys_api_perf_jit_get_status(self):
        code = """if 1:
            import sys
            sys.activate_stack_trampoline("perf_jit")
            assert sys.is_stack_trampoline_active() is True
            sys.activate_stack_trampoline("perf")
            assert sys.is_stack_trampoline_active() is True
            sys.deactivate_stack_trampoline()
            assert sys.is_stack_trampoline_active() is False
        """
        script_helper.assert_python_ok("-c", code, PYTHON_JIT="0")

    def test_trampoline_status_from_command_line_and_environment(self):
        probe = "import sys; print(sys.is_stack_trampoline_active())"
        cases = [
            ((), {}, "False"),
            (("-X", "perf"), {}, "True"),
            (("-X", "perf_jit"), {}, "True"),
            ((), {"PYTHONPERFSUPPORT": "1"}, "True"),
            ((), {"PYTHON_PERF_JIT_SUPPORT": "1"}, "True"),
            # -E and -I ignore the environment
            (("-E",), {"PYTHONPERFSUPPORT": "1"}, "False"),
            (("-I",), {"PYTHON_PERF_JIT_SUPPORT": "1"}, "False"),
        ]
        for args, env, expected in cases:
            with self.subTest(args=args, env=env):
                pid, rc, stdout, stderr = _run_python(*args, "-c", probe, **env)
                self.assertEqual((rc, stdout.strip(), stderr), (0, expected, ""))

    @unittest.skipIf(_bolt_optimized(), "fails on BOLT instrumented binaries")
    def test_trampoline_works_with_environment_variable(self):
        script, pid, rc, stdout, stderr = self.run_script(_CHAIN, PYTHONPERFSUPPORT="1")
        self.assertEqual((rc, stdout, stderr), (0, "", ""))
        perf_file = pathlib.Path(f"/tmp/perf-{pid}.map")
        self.assertTrue(perf_file.exists(), f"{perf_file} was not written")
        self.assert_symbols(_map_names(perf_file), script, ("foo", "bar", "baz"), perf_file)

    @unittest.skipIf(_bolt_optimized(), "fails on BOLT instrumented binaries")
    def test_perf_jit_writes_jitdump(self):
        activating = "import sys; sys.activate_stack_trampoline('perf_jit')\n"
        ways = [
            ("-X perf_jit", _CHAIN, ("-Xperf_jit",), {}),
            ("PYTHON_PERF_JIT_SUPPORT=1", _CHAIN, (), {"PYTHON_PERF_JIT_SUPPORT": "1"}),
            ("sys.activate_stack_trampoline('perf_jit')", activating + _CHAIN, (), {}),
        ]
        for way, code, args, env in ways:
            with self.subTest(way):
                script, pid, rc, stdout, stderr = self.run_script(code, *args, **env)
                self.assertEqual((rc, stdout, stderr), (0, "", ""))
                dump = pathlib.Path(f"/tmp/jit-{pid}.dump")
                self.assertTrue(dump.exists(), f"{dump} was not written")
                self.assert_symbols(_jitdump_names(dump, pid), script, ("foo", "bar", "baz"), dump)
                # the perf map is the other backend's output
                self.assertFalse(pathlib.Path(f"/tmp/perf-{pid}.map").exists())


def is_unwinding_reliable_with_frame_pointers():
    cflags = sysconfig.get_config_var("PY_CORE_CFLAGS")
    return bool(cflags) and "no-omit-frame-pointer" in cflags


def _perf_version():
    """(major, minor) of `perf --version` ("perf version 6.12.9", "6.7-3", "6.12.9.g242e6068fd5c"), or None."""
    try:
        output = subprocess.check_output(["perf", "--version"], universal_newlines=True,
                                         stderr=subprocess.STDOUT)
    except (subprocess.SubprocessError, OSError):
        return None
    match = re.search(r"version (\d+)\.(\d+)", output)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _is_perf_version_at_least(major, minor):
    version = _perf_version()
    return version is not None and version >= (major, minor)


def _first_lines(text, count=2, width=240):
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join(lines[:count])[:width]


_perf_problem = ...


def perf_command_problem():
    """Why the perf tool cannot record this interpreter here, or None if it can."""
    global _perf_problem
    if _perf_problem is not ...:
        return _perf_problem
    _perf_problem = _find_perf_problem()
    return _perf_problem


def _find_perf_problem():
    try:
        helptext = subprocess.check_output(["perf", "--help"], universal_newlines=True,
                                           stderr=subprocess.STDOUT)
    except OSError as exc:
        return f"perf not found ({exc.strerror})"
    except subprocess.SubprocessError as exc:
        return f"perf --help failed: {exc}"
    # Fedora's `perf version` prints no number: perf.data in the help text
    # tells Linux's perf apart from other programs of that name.
    if "perf.data" not in helptext:
        return "the perf on PATH is not Linux's perf tool"
    with tempfile.TemporaryDirectory() as script_dir:
        output_file = os.path.join(script_dir, "perf_output.perf")
        command = ["perf", "record", "--no-buildid", "--no-buildid-cache", "-g",
                   "--call-graph=fp", "-o", output_file, "--",
                   sys.executable, "-c", 'print("hello")']
        try:
            proc = subprocess.run(command, cwd=script_dir, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, universal_newlines=True,
                                  env=_child_env(), timeout=300)
        except (subprocess.SubprocessError, OSError) as exc:
            return f"perf record failed: {exc}"
        if proc.returncode != 0 or "hello" not in proc.stdout:
            return (f"perf record is not usable here (exit {proc.returncode}): "
                    f"{_first_lines(proc.stdout)}")
    return None


def perf_command_works():
    return perf_command_problem() is None


def run_perf(cwd, *args, use_jit=False, **env_vars):
    """Record `args` with perf (frame pointers, or dwarf + perf inject --jit); return perf script's (stdout, stderr)."""
    env = _child_env(**env_vars)
    output_file = os.path.join(cwd, "perf_output.perf")
    record = ["perf", "record", "--no-buildid", "--no-buildid-cache", "-g"]
    if use_jit:
        # CLOCK_MONOTONIC (-k1) is the jitdump's clock; 99 Hz keeps the
        # 64 KiB stack copies of dwarf unwinding few.
        record += ["--call-graph=dwarf,65528", "-F99", "-k1"]
    else:
        record += ["--call-graph=fp"]
    record += ["-o", output_file, "--", *args]
    proc = subprocess.run(record, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    if proc.returncode:
        raise AssertionError(f"perf record failed with exit code {proc.returncode}: "
                             f"{proc.stderr.decode('utf-8', 'replace')}")
    if use_jit:
        injected = os.path.join(cwd, "jit_output.perf")
        proc = subprocess.run(["perf", "inject", "-j", "-i", output_file, "-o", injected],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        if proc.returncode:
            raise AssertionError(f"perf inject failed with exit code {proc.returncode}: "
                                 f"{proc.stderr.decode('utf-8', 'replace')}")
        os.replace(injected, output_file)
    proc = subprocess.run(["perf", "script", "-i", output_file], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env, check=True)
    return proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


class TestPerfProfilerMixin:
    """The functions of a script show in perf's samples only with the trampoline on."""

    def run_perf(self, script_dir, script, activate_trampoline=True):
        raise NotImplementedError

    def record_busy_chain(self, activate_trampoline):
        with tempfile.TemporaryDirectory() as script_dir:
            script = script_helper.make_script(script_dir, "perftest", _BUSY_CHAIN)
            stdout, stderr = self.run_perf(script_dir, script, activate_trampoline=activate_trampoline)
        return script, stdout, stderr

    def assert_in_samples(self, symbol, samples, expected=True):
        if (symbol in samples) != expected:
            # perf script's whole output would bury the message: show one sample
            first = samples.strip().split("\n\n", 1)[0]
            count = samples.count("\n\n")
            self.fail(f"{symbol} {'not ' if expected else ''}found in perf script's {count} samples; "
                      f"the first:\n{first}")

    def test_python_calls_appear_in_the_stack_if_perf_activated(self):
        script, stdout, stderr = self.record_busy_chain(activate_trampoline=True)
        self.assertEqual(stderr, "")
        for function in ("foo", "bar", "baz"):
            self.assert_in_samples(f"py::{function}:{script}", stdout)

    def test_python_calls_do_not_appear_in_the_stack_if_perf_deactivated(self):
        script, stdout, stderr = self.record_busy_chain(activate_trampoline=False)
        self.assertEqual(stderr, "")
        for function in ("foo", "bar", "baz"):
            self.assert_in_samples(f"py::{function}:{script}", stdout, expected=False)


def _skip_unless_perf_works():
    problem = perf_command_problem()
    if problem is not None:
        raise unittest.SkipTest(f"perf command doesn't work: {problem}")


@unittest.skipIf(_bolt_optimized(), "fails on BOLT instrumented binaries")
@unittest.skipUnless(is_unwinding_reliable_with_frame_pointers(),
                     "Unwinding is unreliable with frame pointers")
class TestPerfProfiler(_CleansTmpFiles, TestPerfProfilerMixin, unittest.TestCase):
    """perf record --call-graph=fp of -X perf."""

    @classmethod
    def setUpClass(cls):
        _skip_unless_perf_works()
        super().setUpClass()

    def run_perf(self, script_dir, script, activate_trampoline=True):
        flags = ("-Xperf",) if activate_trampoline else ()
        return run_perf(script_dir, sys.executable, *flags, script)

    def test_pre_fork_compile(self):
        # 3.13 calls these through _testinternalcapi; the backports export the
        # same C API (Include/cpython/ceval.h), reached here with ctypes.
        try:
            import ctypes
        except ImportError:
            self.skipTest("ctypes is needed to call PyUnstable_PerfTrampoline_*()")
        # exported wherever the trampoline is built (PY_HAVE_PERF_TRAMPOLINE)
        self.assertTrue(hasattr(ctypes.pythonapi, "PyUnstable_PerfTrampoline_CompileCode"),
                        "PyUnstable_PerfTrampoline_CompileCode is not exported")
        code = """if 1:
            import ctypes, os, time

            compile_code = ctypes.pythonapi.PyUnstable_PerfTrampoline_CompileCode
            compile_code.argtypes = [ctypes.py_object]
            compile_code.restype = ctypes.c_int
            persist_after_fork = ctypes.pythonapi.PyUnstable_PerfTrampoline_SetPersistAfterFork
            persist_after_fork.argtypes = [ctypes.c_int]
            persist_after_fork.restype = ctypes.c_int

            def foo_fork():
                pass

            def bar_fork():
                foo_fork()

            def foo():
                time.sleep(1)

            def bar():
                foo()

            def compile_trampolines_for_all_functions():
                assert persist_after_fork(1) == 1
                for obj in list(globals().values()):
                    if callable(obj) and hasattr(obj, "__code__"):
                        assert compile_code(obj.__code__) == 0

            if __name__ == "__main__":
                compile_trampolines_for_all_functions()
                child = os.fork()
                if child == 0:
                    print(os.getpid())
                    bar_fork()
                else:
                    bar()
                    os.waitpid(child, 0)
        """
        with tempfile.TemporaryDirectory() as script_dir:
            script = script_helper.make_script(script_dir, "perftest", code)
            pid, rc, stdout, stderr = _run_python("-Xperf", script)
        self.assertEqual(rc, 0, stderr)
        self.assertNotIn("Error:", stderr)
        child_pid = int(stdout.strip())
        parent_map = pathlib.Path(f"/tmp/perf-{pid}.map")
        child_map = pathlib.Path(f"/tmp/perf-{child_pid}.map")
        self.assertTrue(parent_map.exists(), f"{parent_map} was not written")
        self.assertTrue(child_map.exists(), f"{child_map} was not written by the forked child")
        parent_lines = parent_map.read_text().splitlines()
        child_lines = set(child_map.read_text().splitlines())
        parent_names = _map_names(parent_map)
        for function in ("foo", "bar", "foo_fork", "bar_fork"):
            self.assertIn(f"py::{function}:{script}", parent_names)
        child_names = _map_names(child_map)
        for function in ("foo_fork", "bar_fork"):
            self.assertIn(f"py::{function}:{script}", child_names)
        # the trampolines compiled before the fork are the child's too: the
        # same addresses in both maps
        for line in parent_lines:
            if line.endswith((f"py::foo_fork:{script}", f"py::bar_fork:{script}")):
                self.assertIn(line, child_lines)


@unittest.skipIf(_bolt_optimized(), "fails on BOLT instrumented binaries")
class TestPerfProfilerWithDwarf(_CleansTmpFiles, TestPerfProfilerMixin, unittest.TestCase):
    """perf record --call-graph=dwarf of -X perf_jit, then perf inject --jit."""

    PATTERNS = ("jit*.dump", "jitted-*.so")

    @classmethod
    def setUpClass(cls):
        _skip_unless_perf_works()
        if not _is_perf_version_at_least(6, 6):
            raise unittest.SkipTest("perf command may not work due to a perf bug "
                                    f"(perf {_perf_version()}, perf_jit needs 6.6 or later)")
        super().setUpClass()

    def run_perf(self, script_dir, script, activate_trampoline=True):
        flags = ("-Xperf_jit",) if activate_trampoline else ()
        return run_perf(script_dir, sys.executable, *flags, script, use_jit=True)


if __name__ == "__main__":
    unittest.main()
