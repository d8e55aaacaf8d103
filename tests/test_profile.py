"""`python -m cpython_perf profile`: your own program under real perf (cpython_perf/profile/).

Unit tests (no Docker): the command line and its usage errors, the mode chosen for each kind of cell,
the perf command lines of each mode, the hand-over of the outputs, the pip settings passed into the
container, the derived image's tag, and the flame graph's stacks.

Container tests (marked `container`; skipped, with the reason, where an image they need is not built
here): the howto's seed script in 3.13-fp (mode perf, frame pointers) and 3.13-ft (mode perf_jit), a
program whose chain runs through a third-party wheel's code (toolz.pipe) installed from the configured
package index with --requirements (skipped with pip's message where the index cannot be reached), and an
--image/--python target.  Each asserts the chain, root first, on the stacks parsed from the written
flame graph SVG.
"""

from __future__ import annotations

import argparse
import re
import shutil
from html import escape
from pathlib import Path

import pytest

from cpython_perf import cli
from cpython_perf.profile import commands, requirements, results, session, steps, target
from cpython_perf.errors import DriverError
from cpython_perf.check.external import ExternalTarget, TargetFacts, PerfFacts
from cpython_perf.matrix import PROJECT_ROOT, load_matrix

MATRIX = load_matrix()
SEED = PROJECT_ROOT / "conformance" / "scripts" / "script.py"


def parse(argv: list[str]):
    """(args, program) as cli.main parses a profile command line."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    commands.add_arguments(sub.add_parser("profile"))
    argv, program = commands.split_program(argv)
    return parser.parse_args(argv), program


def run_cli(argv, capsys) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().err


# --------------------------------------------------------------------------
# Command line


def test_program_is_everything_after_the_first_double_dash():
    args, program = parse(["profile", "3.13-fp", "--mode", "perf", "--", "script.py", "--", "-x", "--mode"])
    assert args.cell == "3.13-fp" and args.mode == "perf"
    assert program == ["script.py", "--", "-x", "--mode"]


def test_no_double_dash_means_no_program_and_other_commands_are_untouched():
    assert commands.split_program(["profile", "3.13-fp"]) == (["profile", "3.13-fp"], None)
    assert commands.split_program(["cells"]) == (["cells"], None)


def test_defaults():
    args, program = parse(["profile", "3.13-fp", "--", "x.py"])
    assert (args.mode, args.requirements, args.out, args.frequency) == (None, None, commands.DEFAULT_OUT, 999)


@pytest.mark.parametrize("argv, message", [
    (["profile", "3.13-fp"], "no program to profile"),
    (["profile", "--", "script.py"], "which cell?"),
    (["profile", "3.13-fp", "--mode", "perf_jit", "--", "script.py"],
     "3.13-fp does not support perf mode 'perf_jit': it claims perf (valid: --mode perf)"),
    (["profile", "3.13-release", "--mode", "perf", "--", "script.py"], "valid: --mode perf_jit"),
    (["profile", "3.99-fp", "--", "script.py"], "unknown cell '3.99-fp'"),
    (["profile", "3.13-release-i386", "--", "script.py"], "build-only"),
    (["profile", "3.13-fp-aarch64", "--", "script.py"], "qemu-user"),
    (["profile", "3.11-fp-vanilla", "--", "script.py"], "claims no perf mode"),
    (["profile", "3.13-fp", "--image", "x", "--python", "y", "--", "script.py"], "not both"),
    (["profile", "--image", "x", "--", "script.py"], "--image and --python go together"),
    (["profile", "3.13-fp", "--", "missing.py"], "missing.py: no such file"),
    (["profile", "3.13-fp", "-F", "0", "--", "script.py"], "--frequency must be a positive"),
])
def test_usage_errors_exit_2_with_one_line_before_anything_runs(argv, message, tmp_path, monkeypatch, capsys):
    (tmp_path / "script.py").write_text("pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("cpython_perf.host.docker_client", lambda *a, **k: pytest.fail("Docker was asked"))
    code, err = run_cli(argv, capsys)
    assert code == 2, err
    assert message in err and err.startswith("error: ") and "Traceback" not in err


def test_an_unknown_mode_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["profile", "3.13-fp", "--mode", "dwarf", "--", "script.py"])
    assert info.value.code == 2
    assert "invalid choice: 'dwarf'" in capsys.readouterr().err


def test_a_run_time_failure_exits_1():
    assert target.ProfileFailed("x").exit_code == 1 and DriverError("x").exit_code == 2


def test_an_engine_error_is_a_one_line_run_time_failure(monkeypatch):
    import docker.errors

    def refuse(*args, **kwargs):
        raise docker.errors.APIError("500 Server Error: cannot mount\nvolume")

    monkeypatch.setattr(commands, "run", refuse)
    with pytest.raises(target.ProfileFailed, match=r"^the Docker engine refused: 500 Server Error: cannot mount volume$"):
        commands.main(MATRIX, None, ["x.py"])


# --------------------------------------------------------------------------
# Mode


@pytest.mark.parametrize("cell, mode", [("3.13-fp", "perf"), ("3.11-fp", "perf"), ("3.9-fp", "perf"),
                                        ("3.13-release", "perf_jit"), ("3.11-release", "perf_jit"),
                                        ("3.13-O0", "perf"), ("3.13-ft", "perf"), ("3.13-distro", "perf")])
def test_default_mode_is_perf_where_claimed_else_perf_jit(cell, mode):
    assert target.choose_mode(target.cell_target(MATRIX, cell), None) == mode


def test_a_claimed_mode_is_taken():
    assert target.choose_mode(target.cell_target(MATRIX, "3.13-ft"), "perf_jit") == "perf_jit"


def _external(cflags: str, offered=("perf", "perf_jit")) -> target.Target:
    facts = TargetFacts({"config": {"CFLAGS": cflags}, "version": [3, 13, 5]}, PerfFacts("perf"))
    return target.Target("img py", "img", "/usr/bin/python3", "perf", tuple(offered),
                         ExternalTarget("img", "/usr/bin/python3"), facts=facts)


def test_an_external_interpreter_defaults_by_its_frame_pointers():
    assert target.default_mode(_external("-O2 -fno-omit-frame-pointer")) == "perf"
    assert target.default_mode(_external("-O2")) == "perf_jit"
    assert target.default_mode(_external("-O2", offered=("perf",))) == "perf"


def test_an_external_interpreter_refuses_a_backend_it_does_not_offer():
    with pytest.raises(DriverError, match=r"it offers perf \(valid: --mode perf\)"):
        target.choose_mode(_external("", offered=("perf",)), "perf_jit")


# --------------------------------------------------------------------------
# Program and command lines


def test_a_script_in_the_current_directory_runs_from_src(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "s.py").write_text("")
    assert steps.program_argv(["pkg/s.py", "a", "-b"], tmp_path) == ["/src/pkg/s.py", "a", "-b"]
    assert steps.program_argv([str(tmp_path / "pkg" / "s.py")], tmp_path) == ["/src/pkg/s.py"]
    assert steps.program_argv(["-m", "mod", "x"], tmp_path) == ["-m", "mod", "x"]
    assert steps.program_argv(["/usr/lib/x.py"], tmp_path) == ["/usr/lib/x.py"]   # a path in the image


def test_a_script_outside_the_current_directory_is_refused(tmp_path):
    (tmp_path / "here").mkdir()
    (tmp_path / "s.py").write_text("")
    with pytest.raises(DriverError, match="outside the current directory"):
        steps.program_argv([str(tmp_path / "s.py")], tmp_path / "here")


def _steps(cell: str, mode: str, python="python3", frequency=999, ring="4096K"):
    return steps.profile_steps(target.cell_target(MATRIX, cell), mode, python, ["/src/s.py", "arg"], frequency,
                               ring_buffer=ring)


def test_perf_mode_records_frame_pointer_call_graphs():
    made = _steps("3.13-fp", "perf")
    assert [s.name for s in made] == ["record", "script", "report"]
    assert made[0].argv == ["perf", "record", "-F", "999", "-g", "-o", "/out/perf.data", "--",
                            "python3", "-X", "perf", "/src/s.py", "arg"]
    assert "dwarf" not in made[0].display
    assert made[1].display == ("perf script -F comm,pid,tid,time,event,ip,sym,dso -i /out/perf.data "
                               "> /out/perf.script.txt")
    assert made[0].stream and made[1].required and not made[2].required


def test_perf_jit_records_dwarf_and_injects():
    made = _steps("3.13-release", "perf_jit", python=f"{requirements.VENV}/bin/python", frequency=9999)
    record, inject, script, report = made
    assert record.argv == ["perf", "record", "-F", "9999", "-g", "-k", "1", "--call-graph", "dwarf", "-m", "4096K",
                           "-o", "/out/perf.data", "--", f"{requirements.VENV}/bin/python", "-X", "perf_jit",
                           "/src/s.py", "arg"]
    assert inject.argv == [f"{requirements.VENV}/bin/python", "-E", steps.JIT_INJECT, "-i", "/out/perf.data",
                           "-o", "/out/perf.jit.data", "--fallback-perf", "perf"]
    assert "-i /out/perf.jit.data" in script.display and "-i /out/perf.jit.data" in report.display


def test_the_cells_dwarf_dump_size_is_kept():
    assert "dwarf,65528" in _steps("3.13-O0", "perf_jit")[0].argv


def test_the_ring_buffer_is_sized_in_the_container():
    options = steps.record_options(target.cell_target(MATRIX, "3.13-release"), "perf_jit", 999)
    assert steps.RING_BUFFER_PLACEHOLDER in options
    assert "dwarf_mmap" in steps.ring_buffer_step().argv[-1]


def test_outputs_go_to_the_invoking_user():
    assert steps.ownership_command(0, 0) == f"rm -f {steps.START_MARKER}; chown -R 0:0 /out"
    line = steps.ownership_command(1000, 100)
    assert line.endswith("chown -R 1000:100 /out")
    # what became root's during the run, less what was root's before it (listed in the marker)
    assert f"find /src -xdev -user 0 -newer {steps.START_MARKER} | grep -vxF -f {steps.START_MARKER} |" in line
    assert steps.marker_command(1000) == f"find /src -xdev -user 0 > {steps.START_MARKER}"
    assert steps.marker_command(0) == f"touch {steps.START_MARKER}"


def test_docker_run_line_is_a_command_a_user_can_paste():
    line = session.docker_run_line("cpython-perf:3.13-fp", {Path("/h/my dir"): ("/src", "rw"),
                                                            Path("/h/c.pem"): ("/c.pem", "ro")},
                                   ["SYS_ADMIN"], {"A": "b c"}, "/src", ["sleep", "infinity"])
    assert line == ("docker run --rm --cap-add SYS_ADMIN -v '/h/my dir:/src' -v /h/c.pem:/c.pem:ro -e 'A=b c' "
                    "-w /src cpython-perf:3.13-fp sleep infinity")


def test_prepare_out_removes_only_its_own_outputs(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "perf.data").write_text("old")
    (out / "notes.txt").write_text("mine")
    (out / "tmp").mkdir()
    (out / "tmp" / "perf-1.map").write_text("old")
    results.prepare_out(out)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "tmp"]
    assert not list((out / "tmp").iterdir()) and (out / "tmp").stat().st_mode & 0o1777 == 0o1777


# --------------------------------------------------------------------------
# pip in the container


def test_host_pip_settings_layer_files_then_environment(tmp_path):
    first, second = tmp_path / "a.conf", tmp_path / "b.conf"
    first.write_text("[global]\nindex-url = https://mirror.invalid/simple\ncert = /x.pem\nuser = yes\n")
    second.write_text("[install]\nextra-index-url =\n    file:///srv/idx/simple\n    https://other.invalid/s\n")
    settings = requirements.host_pip_settings({"PIP_CERT": "/y.pem", "PIP_TIMEOUT": "60"}, [first, second])
    assert settings == {"index-url": "https://mirror.invalid/simple", "cert": "/y.pem",
                        "extra-index-url": "file:///srv/idx/simple https://other.invalid/s", "timeout": "60"}


def test_pip_config_files_in_pips_order(tmp_path):
    files = requirements.pip_config_files({"XDG_CONFIG_DIRS": "/a:/b", "PIP_CONFIG_FILE": "/c.conf"}, tmp_path)
    assert files == [Path("/b/pip/pip.conf"), Path("/a/pip/pip.conf"), Path("/etc/pip.conf"),
                     tmp_path / ".pip/pip.conf", tmp_path / ".config/pip/pip.conf", Path("/c.conf")]


def test_pip_passthrough_mounts_local_indexes_and_the_ca_bundle(tmp_path):
    (tmp_path / "idx" / "simple").mkdir(parents=True)
    (tmp_path / "wheels").mkdir()
    cert = tmp_path / "ca.pem"
    cert.write_text("")
    settings = {"index-url": "https://mirror.invalid/simple",
                "extra-index-url": f"file://{tmp_path}/idx/simple file:///nowhere/simple",
                "find-links": str(tmp_path / "wheels"), "cert": str(cert), "trusted-host": "mirror.invalid"}
    got = requirements.pip_passthrough(settings, {"HTTPS_PROXY": "http://proxy.invalid:3128", "HOME": "/root"})
    assert got.env == {"PIP_INDEX_URL": "https://mirror.invalid/simple",
                       "PIP_EXTRA_INDEX_URL": f"file://{tmp_path}/idx/simple",
                       "PIP_FIND_LINKS": str(tmp_path / "wheels"), "PIP_CERT": requirements.PIP_CERT_IN_CONTAINER,
                       "PIP_TRUSTED_HOST": "mirror.invalid", "HTTPS_PROXY": "http://proxy.invalid:3128"}
    # a file:// simple index links its files by ../../files/...: its parent is mounted
    assert got.mounts == {tmp_path / "idx": str(tmp_path / "idx"), tmp_path / "wheels": str(tmp_path / "wheels"),
                          cert: requirements.PIP_CERT_IN_CONTAINER}
    assert any("/nowhere" in n and "does not exist" in n for n in got.notes)


def test_pip_passthrough_never_hides_the_images_own_directories():
    got = requirements.pip_passthrough({"find-links": "/usr", "constraint": "/"})
    assert not got.mounts and not got.env
    assert all("would hide" in n for n in got.notes) and len(got.notes) == 2


def test_pip_failure_hints():
    assert "could not be reached" in requirements.pip_failure_hint("... NewConnectionError(...) Max retries exceeded")
    assert "not on the configured package index" in requirements.pip_failure_hint(
        "ERROR: No matching distribution found for nosuch")
    assert requirements.pip_failure_hint("ERROR: something else") == ""


def test_requirements_image_tag_follows_image_python_and_contents():
    tag = requirements.requirements_tag("3.13-fp", "sha256:aa", "python3", b"toolz==1.1.0\n")
    assert re.fullmatch(r"cpython-perf-profile:3\.13-fp-[0-9a-f]{12}", tag)
    assert tag == requirements.requirements_tag("3.13-fp", "sha256:aa", "python3", b"toolz==1.1.0\n")
    others = {requirements.requirements_tag("3.13-fp", "sha256:bb", "python3", b"toolz==1.1.0\n"),
              requirements.requirements_tag("3.13-fp", "sha256:aa", "/x/python", b"toolz==1.1.0\n"),
              requirements.requirements_tag("3.13-fp", "sha256:aa", "python3", b"toolz\n")}
    assert tag not in others and len(others) == 3
    assert re.fullmatch(r"cpython-perf-profile:my-img-1-usr-bin-python3-[0-9a-f]{12}",
                        requirements.requirements_tag("My/Img:1 /usr/bin/python3", "i", "p", b""))


def test_the_derived_image_is_the_image_plus_the_venv():
    text = requirements.requirements_dockerfile("sha256:abc", "requirements.txt")
    assert text.splitlines() == ["FROM sha256:abc", f"ADD {requirements.VENV_TAR} /opt/",
                                 'LABEL cpython-perf.profile.base="sha256:abc" '
                                 'cpython-perf.profile.requirements="requirements.txt"']
    assert [s.argv[:4] for s in requirements.venv_steps("python3", "req.txt")] == [
        ["python3", "-m", "venv", requirements.VENV], [f"{requirements.VENV}/bin/python", "-m", "pip", "install"]]


# --------------------------------------------------------------------------
# Reading the flame graph


def _frame(name: str, y: int, x: int, w: int) -> str:
    return (f'<g><title>{escape(name)} ({w} samples, 1.00%)</title><rect x="0%" y="{y}" width="1%" height="15" '
            f'fill="rgb(1,2,3)" fg:x="{x}" fg:w="{w}"/><text x="0" y="0"></text></g>')


def _svg(*frames) -> str:
    return "<svg>" + "".join(_frame(*f) for f in frames) + "</svg>"


MOD, BAZ, BAR, FOO = (f"py::{f}:/src/script.py" for f in ("<module>", "baz", "bar", "foo"))


def test_svg_stacks_are_root_first():
    svg = _svg(("all", 100, 0, 10), (MOD, 84, 0, 10), ("_PyEval_EvalFrameDefault", 68, 0, 10), (BAZ, 52, 0, 8),
               (BAR, 36, 0, 8), (FOO, 20, 1, 6), ("other", 52, 8, 2))
    stacks = results.svg_stacks(svg)
    assert ("all", MOD, "_PyEval_EvalFrameDefault", BAZ, BAR, FOO) in stacks
    assert ("all", MOD, "_PyEval_EvalFrameDefault", "other") in stacks
    assert results.python_chain_found(stacks, [MOD, BAZ, BAR, FOO])   # C frames in between are ignored
    assert results.python_chain_found(stacks, [BAR, re.compile(r"py::foo:.*")])


def test_a_chain_in_the_wrong_order_or_split_across_stacks_is_not_found():
    wrong = _svg(("all", 100, 0, 10), (FOO, 84, 0, 10), (BAR, 68, 0, 10), (BAZ, 52, 0, 10))
    assert not results.python_chain_found(results.svg_stacks(wrong), [BAZ, BAR, FOO])
    split = _svg(("all", 100, 0, 10), (BAZ, 84, 0, 5), (BAR, 84, 5, 5), (FOO, 68, 5, 5))
    assert not results.python_chain_found(results.svg_stacks(split), [BAZ, BAR, FOO])
    gap = _svg(("all", 100, 0, 10), (BAZ, 84, 0, 10), ("py::other:/x.py", 68, 0, 10), (BAR, 52, 0, 10))
    assert not results.python_chain_found(results.svg_stacks(gap), [BAZ, BAR])


def test_summary_counts_samples_and_innermost_python_functions():
    text = ("python3 10/10 1.000000: task-clock:\n"
            "\t1 _PyEval_EvalFrameDefault (/opt/cpython/bin/python3.13)\n"
            f"\t2 {FOO} (/tmp/perf-10.map)\n\t3 {BAR} (/tmp/perf-10.map)\n\n"
            "python3 10/10 1.100000: task-clock:\n\t1 main (/opt/cpython/bin/python3.13)\n\n")
    lines = results.summarise(text)
    assert lines[0] == "2 samples, 1 with Python frames"
    assert lines[1].split() == ["1", "50.0%", FOO]
    assert "no py:: frame" in results.summarise(text.split("\n\n")[1] + "\n")[1]


# --------------------------------------------------------------------------
# For real, in the cell images


DEP_PROGRAM = '''"""A program whose chain runs through a third-party wheel: toolz.pipe (pure Python) calls foo."""
import sys

from toolz import pipe


def foo(n):
    result = 0
    for _ in range(n):
        result += 1
    return result


def bar(n):
    return pipe(n, foo)


def baz(n):
    return bar(n)


if __name__ == "__main__":
    print("result", baz(int(sys.argv[1])))
'''
DEP_REQUIREMENT = "toolz==1.1.0"   # a pure-Python py3 wheel
PIPE = re.compile(rf"py::pipe:{re.escape(requirements.VENV)}/lib/python3\.\d+t?/site-packages/toolz/functoolz\.py")
OWNER = (4321, 4322)   # not the user running the tests: the outputs must be handed over


def need_image(client, image: str) -> str:
    if target.image_id(client, image) is None:
        pytest.skip(f"{image} is not built here (nox -s build-{image.split(':', 1)[1]})")
    return image


def profile_for_real(client, workdir: Path, argv: list[str]) -> tuple[Path, list[str]]:
    """Run `profile ARGV` in workdir as the CLI would (outputs handed to OWNER); (out dir, printed lines)."""
    args, program = parse(["profile", *argv])
    printed: list[str] = []
    code = commands.run(MATRIX, args, program, log=printed.append, client=client, cwd=workdir, owner=OWNER)
    print("\n".join(printed))
    assert code == 0, "\n".join(printed)
    return workdir / args.out, printed


def assert_written(out: Path, mode: str, printed: list[str]) -> list[tuple[str, ...]]:
    """The outputs are there, the user's, and the command lines were printed; the flame graph's stacks."""
    names = [steps.PERF_DATA, steps.SCRIPT_TEXT, steps.REPORT_TEXT, steps.FLAMEGRAPH, steps.COMMANDS_TEXT]
    if mode == "perf_jit":
        names.append(steps.JIT_DATA)
    for name in names:
        assert (out / name).stat().st_size > 0, name
        assert ((out / name).stat().st_uid, (out / name).stat().st_gid) == OWNER, name
    record = next(line for line in printed if line.startswith("$ perf record"))
    if mode == "perf":
        assert " -g " in record and "dwarf" not in record and "-X perf " in record
    else:
        assert "--call-graph dwarf" in record and "-X perf_jit " in record
        inject = next(line for line in printed if line.startswith("$ ") and f" -E {steps.JIT_INJECT} " in line)
        assert inject.endswith("-o /out/perf.jit.data --fallback-perf perf")
    assert any("cpython-perf-flamegraph" in line for line in printed)
    assert "$ perf record" in (out / steps.COMMANDS_TEXT).read_text()
    return results.svg_stacks((out / steps.FLAMEGRAPH).read_text())


@pytest.mark.container
@pytest.mark.parametrize("cell, mode", [("3.13-fp", None), ("3.13-ft", "perf_jit")],
                         ids=["3.13-fp-perf", "3.13-ft-perf_jit"])
def test_profile_seed_script(docker_client, tmp_path, cell, mode):
    cell_target = target.cell_target(MATRIX, cell)
    need_image(docker_client, cell_target.image)
    mode = mode or target.choose_mode(cell_target, None)
    shutil.copy2(SEED, tmp_path / "script.py")
    out, printed = profile_for_real(docker_client, tmp_path, [cell, "--mode", mode, "--", "script.py"])
    stacks = assert_written(out, mode, printed)
    assert results.python_chain_found(stacks, [MOD, BAZ, BAR, FOO]), (
        f"no stack of {out / steps.FLAMEGRAPH} holds {MOD} > {BAZ} > {BAR} > {FOO}")
    # and not the other way round: the check can fail
    assert not results.python_chain_found(stacks, [FOO, BAR, BAZ])


@pytest.mark.container
@pytest.mark.parametrize("name", ["sid-3.14", "sid-3.15"])
def test_profile_a_stock_interpreter_in_its_image(docker_client, tmp_path, name):
    """profile --image/--python with a distribution's own interpreter (no series): the mode it is chosen is
    one the stock entry says it gives, and the flame graph has the chain.  The smoke stock interpreter's
    image is made where missing (as `nox -s tests` checks it anyway); another is used where it is there."""
    from cpython_perf.check import external

    stock = MATRIX.stock[name]
    image = external.stock_image_tag(stock.suite, stock.package, stock.perf_suite)
    if name in MATRIX.smoke_stock:
        external.ensure_stock_image(docker_client, stock.suite, stock.package, stock.perf_suite, log=print)
    elif target.image_id(docker_client, image) is None:
        pytest.skip(f"{image} is not made here (nox -s stock-{name})")
    shutil.copy2(SEED, tmp_path / "script.py")
    out, printed = profile_for_real(docker_client, tmp_path, ["--image", image, "--python", stock.python, "--",
                                                              "script.py"])
    mode = "perf_jit" if any(line.startswith("$ perf record") and "-X perf_jit " in line for line in printed) \
        else "perf"
    assert mode in stock.modes, f"profile chose {mode} for {name}, which matrix.yaml says gives {stock.modes}"
    stacks = assert_written(out, mode, printed)
    assert results.python_chain_found(stacks, [MOD, BAZ, BAR, FOO]), (
        f"no stack of {out / steps.FLAMEGRAPH} holds {MOD} > {BAZ} > {BAR} > {FOO}")


@pytest.fixture(scope="module")
def index_reachable(docker_client, tmp_path_factory):
    """Skip (with pip's own words) unless pip in a cell image can fetch the dependency from the package index
    the host's pip is configured for."""
    from cpython_perf.run import containers

    image = need_image(docker_client, "cpython-perf:3.13-fp")
    passthrough = requirements.pip_passthrough(requirements.host_pip_settings())
    mounts = {h: c for h, c in passthrough.mounts.items()}
    command = (f"python3 -m venv /tmp/v && /tmp/v/bin/python -m pip download --no-deps --no-cache-dir "
               f"-d /tmp/d {DEP_REQUIREMENT}")
    result = containers.run(docker_client, image, command, workdir="/", read_only=mounts, env=passthrough.env,
                            timeout=600)
    if result.exit_code != 0:
        said = [l for l in (result.stderr + result.stdout).splitlines() if l.strip()][-2:]
        pytest.skip(f"the package index cannot be reached from {image}: pip download {DEP_REQUIREMENT} "
                    f"exited {result.exit_code}: {' / '.join(said)}")


@pytest.mark.container
@pytest.mark.parametrize("cell, mode", [("3.13-fp", "perf"), ("3.13-ft", "perf_jit")],
                         ids=["3.13-fp-perf", "3.13-ft-perf_jit"])
def test_profile_program_with_a_wheel_dependency(docker_client, index_reachable, tmp_path, cell, mode, capsys):
    need_image(docker_client, target.cell_target(MATRIX, cell).image)
    (tmp_path / "prog.py").write_text(DEP_PROGRAM)
    (tmp_path / "requirements.txt").write_text(DEP_REQUIREMENT + "\n")
    out, printed = profile_for_real(docker_client, tmp_path, [cell, "--mode", mode, "-r", "requirements.txt",
                                                              "--out", "prof", "--", "prog.py", "2000000"])
    stacks = assert_written(out, mode, printed)
    assert any(line.startswith("$ perf record") and f"{requirements.VENV}/bin/python" in line for line in printed)
    assert "result 2000000" in capsys.readouterr().out   # the program's own output goes to the terminal
    chain = [f"py::{f}:/src/prog.py" for f in ("<module>", "baz", "bar")] + [PIPE, "py::foo:/src/prog.py"]
    assert results.python_chain_found(stacks, chain), (
        f"no stack of {out / steps.FLAMEGRAPH} holds <module> > baz > bar > toolz's pipe > foo")
    # the second run takes the cached image
    again, printed = profile_for_real(docker_client, tmp_path, [cell, "--mode", mode, "-r", "requirements.txt",
                                                                "--out", "prof", "--", "prog.py", "200000"])
    assert any("(cached:" in line for line in printed)


@pytest.mark.container
def test_profile_an_image_and_python(docker_client, tmp_path):
    image = need_image(docker_client, "cpython-perf:3.11-fp")
    shutil.copy2(SEED, tmp_path / "script.py")
    out, printed = profile_for_real(docker_client, tmp_path, ["--image", image, "--python", "/opt/cpython/bin/python3",
                                                              "-F", "9999", "--", "script.py"])
    stacks = assert_written(out, "perf", printed)   # sysconfig says frame pointers: perf
    assert results.python_chain_found(stacks, [MOD, BAZ, BAR, FOO])
