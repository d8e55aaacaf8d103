from __future__ import annotations

from cpython_perf.record import perf_runs
from cpython_perf.image import render
from cpython_perf.run.containers import explain_perf_failure
from cpython_perf.matrix import load_matrix


def test_cell_dockerfile_carries_the_cell():
    matrix = load_matrix()
    cell = matrix.cell("3.13-O0")
    text = render.render_cell_dockerfile(cell, "cpython-perf-base:trixie-abc", "d1g3st")
    assert text.startswith("# Rendered by cpython_perf.render")
    assert "FROM cpython-perf-base:trixie-abc" in text
    assert 'CFLAGS="-O0"' in text
    assert "Python-3.13.5.tar.xz" in text
    assert 'org.cpython-perf.inputs="d1g3st"' in text
    assert ("COPY patches/" in text) == (cell.series is not None)


def test_base_tag_follows_the_package_list():
    packages = render.base_packages()
    assert "linux-perf" in packages and "build-essential" in packages
    assert render.base_image_tag("trixie", packages) != render.base_image_tag("trixie", packages + ["gdb"])
    assert render.base_image_tag("trixie", packages) == render.base_image_tag("trixie", list(reversed(packages)))


def test_base_dockerfile_installs_the_same_list():
    packages = render.base_packages()
    text = render.render_base_dockerfile("trixie", packages)
    assert "FROM debian:trixie-slim" in text
    for p in packages:
        assert f"      {p}" in text


def test_perf_mode_command_lines():
    matrix = load_matrix()
    fp = perf_runs.perf_run(matrix.cell("3.13-fp"), "perf").shell
    assert "perf record -F 9999 -g -o /src/perf.data -- python3 -X perf /src/script.py" in fp
    assert "perf inject" not in fp
    jit = perf_runs.perf_run(matrix.cell("3.13-O0"), "perf_jit", "env").shell
    assert "env PYTHON_PERF_JIT_SUPPORT=1 perf record -F 9999 -g -k 1 --call-graph dwarf,65528 -m $(dwarf_mmap)" in jit
    assert "perf inject -i /src/perf.data --jit --output /src/perf.jit.data" in jit
    assert "-i /src/perf.jit.data" in jit
    release = perf_runs.perf_run(matrix.cell("3.13-release"), "perf_jit").shell
    assert "--call-graph dwarf -m $(dwarf_mmap) -o" in release
    sys_api = perf_runs.perf_run(matrix.cell("3.13-fp"), "perf", "sys_api").shell
    assert "sys.activate_stack_trampoline(" in sys_api and "-X" not in sys_api
    none = perf_runs.perf_run(matrix.cell("3.13-fp"), None).shell
    assert "-- python3 /src/script.py" in none
    assert "ulimit -s" not in none
    deep = perf_runs.perf_run(matrix.cell("3.13-O0"), "perf", c_stack_kb=262144).shell
    assert deep.index("ulimit -s 262144") < deep.index("perf record")


def test_perf_run_times_its_phases(tmp_path):
    """The shell a perf run executes times each phase; run it with stand-ins for perf and python3."""
    import subprocess
    run = perf_runs.perf_run(load_matrix().cell("3.13-release"), "perf_jit")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("perf", "python3"):
        (bin_dir / tool).write_text("#!/bin/sh\necho fake > /dev/null\n")
        (bin_dir / tool).chmod(0o755)
    src = tmp_path / "src"
    src.mkdir()
    (src / "perf.jit.data").write_bytes(b"x" * 1234)
    shell = run.shell.replace("/src", str(src))
    proc = subprocess.run(["sh", "-c", shell], env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    phases = perf_runs.parse_phases((src / perf_runs.PHASES_OUTPUT).read_text())
    assert set(phases) == {"record", "inject", "script", "data_bytes"}
    assert phases["data_bytes"] == 1234 and all(phases[p] >= 0 for p in ("record", "inject", "script"))
    assert perf_runs.parse_phases("record 12\nnoise\n") == {"record": 12}


def test_dwarf_ring_buffer_fits_the_memlock_limit():
    """The largest power of two up to 4 MiB per CPU that the memlock limit allows, at least 512 KiB."""
    import subprocess

    def size(memlock_kb, cpus):
        shell = (f"ulimit() {{ echo {memlock_kb}; }}; nproc() {{ echo {cpus}; }}; "
                 f"{perf_runs.DWARF_MMAP_FUNCTION}; dwarf_mmap")
        return subprocess.run(["bash", "-c", shell], capture_output=True, text=True, check=True).stdout.strip()

    assert size(8192, 2) == "4096K"
    assert size(8192, 8) == "1024K"
    assert size(8192, 64) == "512K"
    assert size("unlimited", 2) == "4096K"


def test_perf_permission_message_names_the_capabilities():
    message = explain_perf_failure(
        {"PERFMON": "engine refused the capability: unknown capability: \"CAP_PERFMON\"",
         "SYS_ADMIN": "No permission to enable cpu-clock event.\n"},
        "3",
    )
    assert "CAP_PERFMON (engines that know it) or CAP_SYS_ADMIN" in message
    assert "tried: CAP_PERFMON, CAP_SYS_ADMIN" in message
    assert "--cap-add SYS_ADMIN: No permission to enable cpu-clock event." in message
    assert "perf_event_paranoid = 3" in message


def test_frame_allocation_from_disassembly():
    x86 = "00000000002a3dd0 <_PyEval_EvalFrameDefault>:\n  2a3dd0: push %rbp\n  2a3de9:\tsub    $0x47c0,%rsp\n"
    assert perf_runs.frame_allocation(x86) == 0x47C0
    arm = "<_PyEval_EvalFrameDefault>:\n  4a0: stp x29, x30, [sp, #-96]!\n  4a8: sub sp, sp, #0x4a0\n"
    assert perf_runs.frame_allocation(arm) == 0x4A0
    assert perf_runs.frame_allocation("nothing here") is None


def test_eval_loop_frame_behind_an_assembly_entry(tmp_path):
    """Where _PyEval_EvalFrameDefault is an assembly entry (perf frame records; an entry's own `sub` makes
    room for the records), the loop's frame is the one of _PyEval_EvalLoopRecords; the functions
    after either are not read; without the entry, _PyEval_EvalFrameDefault's own."""
    import subprocess
    listing = tmp_path / "objdump.txt"
    listing.write_text(
        "0000000000000000 <_PyEval_EvalFrameDefault>:\n   0:\tpush   %rbp\n   1:\tmov    %rsp,%rbp\n"
        "   4:\tpush   %rbx\n   e:\tsub    $0x180,%rsp\n  18:\tcall   9 <x>\n  1d:\tpop    %rbp\n"
        "  1e:\tret\n\n"
        "0000000000000010 <_PyFrame_PushUnchecked>:\n  10:\tpush   %rbp\n  14:\tsub    $0x28,%rsp\n\n"
        "00000000000057e0 <_PyEval_EvalLoopRecords>:\n  57e0:\tpush   %r15\n"
        "  57e9:\tsub    $0x320,%rsp\n")
    def frame(command):
        awk = command.split("| ", 1)[1]
        out = subprocess.run(f"cat {listing} | {awk}", shell=True, capture_output=True, text=True, check=True)
        return perf_runs.frame_allocation(out.stdout)
    assert frame(perf_runs.eval_loop_objdump_command("python3")) == 0x320
    assert frame(perf_runs.objdump_command("python3", "_PyFrame_PushUnchecked")) == 0x28
    plain = tmp_path / "plain.txt"
    plain.write_text("0000000000000000 <_PyEval_EvalFrameDefault>:\n   0:\tpush   %rbp\n"
                     "   9:\tsub    $0x188,%rsp\n\n0000000000000400 <other>:\n 400:\tsub    $0x28,%rsp\n")
    listing.write_text(plain.read_text())
    assert frame(perf_runs.eval_loop_objdump_command("python3")) == 0x188


def test_dwarf_reach_at_o0_and_release():
    matrix = load_matrix()
    assert perf_runs.dwarf_reachable_python_frames(matrix.cell("3.13-O0"), 0x47C0) == 3
    assert perf_runs.dwarf_reachable_python_frames(matrix.cell("3.13-release"), 0x178) >= 4
    assert perf_runs.dwarf_reachable_python_frames(matrix.cell("3.13-release"), None) is None


def test_tools_image_follows_the_pins_and_the_crate():
    from dataclasses import replace

    from cpython_perf.image import tools
    from cpython_perf.matrix import load_matrix

    matrix = load_matrix()
    dockerfile = tools.tools_dockerfile(matrix, "http://archive.invalid/debian")
    assert f"samply={matrix.profilers.samply}" in dockerfile
    assert f"librust-inferno-dev={matrix.profilers.inferno}" in dockerfile
    assert f"http://archive.invalid/debian {matrix.profilers.suite} main" in dockerfile
    moved = replace(matrix, profilers=replace(matrix.profilers, samply="0.13.2-1"))
    assert tools.tools_image_tag(tools.tools_dockerfile(moved, "http://archive.invalid/debian")) != \
        tools.tools_image_tag(dockerfile)
    assert tools.tools_image_tag(dockerfile).startswith("cpython-perf-tools:")


def test_script_arguments_reach_the_script_with_every_activation():
    argv, _ = perf_runs.python_command("perf", "xoption", "/bench/seed.py", (5000,))
    assert argv == ["python3", "-X", "perf", "/bench/seed.py", "5000"]
    argv, env = perf_runs.python_command("perf_jit", "env", "/bench/seed.py", (5000,))
    assert argv == ["python3", "/bench/seed.py", "5000"] and env == {"PYTHON_PERF_JIT_SUPPORT": "1"}
    argv, _ = perf_runs.python_command("perf", "sys_api", "/bench/seed.py", (5000,))
    assert "sys.argv[:] = ['/bench/seed.py', '5000']" in argv[2]
    # without arguments the command is the howto's, unchanged
    assert "sys.argv" not in perf_runs.python_command("perf", "sys_api", "/src/script.py")[0][2]
    run = perf_runs.perf_run(load_matrix().cell("3.13-fp"), "perf", args=(5000,))
    assert "python3 -X perf /src/script.py 5000 > /src/python.stdout" in run.shell
