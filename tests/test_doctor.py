"""`python -m cpython_perf doctor`: its checks against fake machines (no Docker), and once for real (container)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from cpython_perf import doctor
from cpython_perf.image import render
from cpython_perf.errors import DockerUnavailable, PerfNotPermitted
from cpython_perf.matrix import PROJECT_ROOT, load_matrix
from cpython_perf.record.perf_event import Attempt, EventChoice, NoSamples

MATRIX = load_matrix()
BASE = render.host_base_image_tag(MATRIX.base_suite)
ARCHIVE = "http://archive.example/debian"
BINFMT_OK = "enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: POCF\n"
TOOLS = {"patch": "/usr/bin/patch", "gpgv": "/usr/bin/gpgv", "mmdebstrap": "/usr/bin/mmdebstrap",
         "dockerd": "/usr/sbin/dockerd"}

# doctor's check of the binfmt handlers of the arches an x86_64 host emulates (aarch64, riscv64), by its name
BINFMT = "binfmt " + ", ".join(a for a in load_matrix().arches
                               if "x86_64" in load_matrix().arch_facts[a].cross_built_on)


class FakeClient:
    def version(self):
        return {"Version": "27.5.1", "ApiVersion": "1.47"}


def machine(**overrides) -> doctor.Machine:
    """A machine where everything the default job needs is there (each fake overridable)."""
    facts = dict(
        which=TOOLS.get,
        docker=FakeClient,
        setup_allowed=lambda: False,
        paranoid=lambda: "2",
        perf_capability=lambda client, image: "PERFMON",
        perf_event=lambda client, image, cap: EventChoice(None, (Attempt(None, "cycles:P", 1200),)),
        images=lambda client: {BASE, "cpython-perf:3.13-fp"},
        docker_root=lambda client: "/var/lib/docker",
        disk_free=lambda path: 80 * 10**9,
        binfmt_entry=lambda handler: BINFMT_OK,
        archive=lambda: ARCHIVE,
        cpus=lambda: 2,
    )
    facts.update(overrides)
    return doctor.Machine(**facts)


def run(m) -> tuple[int, str, dict]:
    lines = []
    code = doctor.main(MATRIX, m, out=lines.append)
    text = "\n".join(lines)
    return code, text, {c.name: c for c in doctor.diagnose(MATRIX, m)}


def test_a_machine_with_everything_passes():
    code, text, checks = run(machine())
    assert code == 0
    assert text.splitlines()[0].startswith("cpython-perf doctor: can this machine build and check the smoke cells")
    assert text.splitlines()[-1].endswith(": yes")
    assert {c.status for c in checks.values()} == {"ok"}
    assert "Docker 27.5.1" in checks["docker engine"].finding
    assert checks["perf capability"].finding.startswith("CAP_PERFMON, probed in cpython-perf:3.13-fp")
    assert "cycles:P" in checks["sampling event"].finding
    for name in ("docker engine", "perf capability", "sampling event", "perf_event_paranoid", "patch", "gpgv",
                 "mmdebstrap", BINFMT, "disk", "build time", "debian archive"):
        assert name in checks, name


def test_every_line_has_a_status_and_every_problem_a_fix():
    _, text, _ = run(machine(which={}.get, paranoid=lambda: "4", binfmt_entry=lambda h: None))
    body = text.splitlines()[1:-1]
    for i, line in enumerate(body):
        if line.strip().startswith("fix: "):
            continue
        status = line.split()[0]
        assert status in ("ok", "warn", "fail"), line
        if status != "ok":
            assert body[i + 1].strip().startswith("fix: "), f"no fix under: {line}"


def test_no_engine_fails_with_the_fix_unless_the_driver_starts_it():
    def absent():
        raise DockerUnavailable("no Docker engine answers at unix:///var/run/docker.sock (FileNotFoundError)")

    code, text, checks = run(machine(docker=absent))
    assert code == 1 and checks["docker engine"].status == "fail"
    assert "fix: install docker.io and start dockerd" in text
    assert text.splitlines()[-1].endswith("NO: docker engine must be fixed first")
    assert checks["perf capability"].finding == "not probed: no Docker engine"
    # as root on Debian the driver starts dockerd (installing docker.io first) itself: a warning, exit 0
    code, _, checks = run(machine(docker=absent, setup_allowed=lambda: True, which={**TOOLS, "dockerd": None}.get))
    assert code == 0 and checks["docker engine"].status == "warn"
    assert "the driver will install docker.io and start dockerd itself" in checks["docker engine"].finding


def test_sys_admin_on_an_engine_without_perfmon():
    _, _, checks = run(machine(perf_capability=lambda client, image: "SYS_ADMIN"))
    assert checks["perf capability"].status == "ok"
    assert "CAP_SYS_ADMIN (this engine does not know CAP_PERFMON)" in checks["perf capability"].finding


def test_perf_refused_is_a_failure_with_the_probes_fix():
    def refused(client, image):
        raise PerfNotPermitted("perf cannot sample inside the container: perf_event_open was refused.\n"
                               "  with --cap-add PERFMON: Permission denied\n"
                               "  with --cap-add SYS_ADMIN: Permission denied\n"
                               "Fix: run with a Docker engine that lets the container add one of these capabilities")
    code, text, checks = run(machine(perf_capability=refused))
    assert code == 1 and checks["perf capability"].status == "fail"
    assert "fix: run with a Docker engine that lets the container add" in text
    assert checks["sampling event"].status == "warn"


def test_no_sample_with_the_default_event_is_a_warning_naming_cpu_clock():
    fallback = EventChoice("cpu-clock", (Attempt(None, "cycles:P", 0), Attempt("cpu-clock", "cpu-clock", 290)))
    code, _, checks = run(machine(perf_event=lambda client, image, cap: fallback))
    event = checks["sampling event"]
    assert code == 0 and event.status == "warn"
    assert "perf's default event gave 0 samples; the suite records with -e cpu-clock (290 samples)" in event.finding
    assert "samply" in event.finding


def test_no_sample_at_all_fails():
    def nothing(client, image, cap):
        raise NoSamples("perf records no sample of a 0.3 s busy loop here (...). Fix: check the kernel")
    code, _, checks = run(machine(perf_event=nothing))
    assert code == 1 and checks["sampling event"].status == "fail"


def test_no_image_with_perf_yet_is_not_probed():
    code, _, checks = run(machine(images=lambda client: set()))
    assert code == 0
    assert checks["perf capability"].status == "warn" and "no image with perf here yet" in checks["perf capability"].finding
    assert "python -m cpython_perf base-image" in checks["perf capability"].fix


def test_the_base_image_is_probed_when_no_cell_image_is_here():
    seen = []
    run(machine(images=lambda client: {BASE}, perf_capability=lambda client, image: seen.append(image) or "PERFMON"))
    assert set(seen) == {BASE}


def test_missing_tools_the_driver_installs_are_warnings_elsewhere_failures():
    code, text, checks = run(machine(which={"dockerd": "/usr/sbin/dockerd"}.get, images=lambda client: set()))
    assert code == 1
    assert checks["patch"].status == "fail" and checks["mmdebstrap"].status == "fail"
    assert checks["gpgv"].status == "warn"   # without it the sha256 pin is the only check: not required
    assert "fix: apt-get install patch" in text
    code, _, checks = run(machine(which={"dockerd": "/usr/sbin/dockerd"}.get, images=lambda client: set(),
                                  setup_allowed=lambda: True))
    assert code == 0 and checks["patch"].status == "warn"
    assert "the driver will install patch with apt-get" in checks["patch"].finding


def test_mmdebstrap_is_not_needed_once_the_base_image_is_here():
    code, _, checks = run(machine(which={k: v for k, v in TOOLS.items() if k != "mmdebstrap"}.get))
    assert code == 0 and checks["mmdebstrap"].status == "ok" and "not needed" in checks["mmdebstrap"].finding


def test_disk_counts_what_is_missing_against_the_figures():
    # nothing here: two cell images, the tools image, the base image and a build's scratch
    need = 2 * doctor.CELL_IMAGE_GB + doctor.TOOLS_IMAGE_GB + doctor.BASE_IMAGE_GB + doctor.BUILD_SCRATCH_GB
    code, _, checks = run(machine(images=lambda client: set(), disk_free=lambda path: int((need - 1) * 1e9)))
    assert code == 1 and checks["disk"].status == "fail"
    assert f"needs about {need:.1f} GB more" in checks["disk"].finding and "cpython-perf:3.11-fp" in checks["disk"].finding
    _, _, checks = run(machine(images=lambda client: set(), disk_free=lambda path: int((need + 1) * 1e9)))
    assert checks["disk"].status == "warn"
    assert "2 cell image(s) to build: about 6 min on 2 cores" in checks["build time"].finding


def test_paranoid_four_is_a_warning_with_the_sysctl():
    _, _, checks = run(machine(paranoid=lambda: "4"))
    assert checks["perf_event_paranoid"].status == "warn"
    assert checks["perf_event_paranoid"].fix == "sysctl -w kernel.perf_event_paranoid=1"


def test_binfmt_without_the_fix_binary_flag():
    _, _, checks = run(machine(binfmt_entry=lambda h: "enabled\nflags: \n"))
    check = checks[BINFMT]
    assert check.status == "warn" and not check.required and "F (fix-binary) flag" in check.finding
    assert "update-binfmts --enable qemu-aarch64" in check.fix


def test_archive_names_where_the_base_image_comes_from(monkeypatch):
    monkeypatch.delenv("CPYTHON_PERF_BASE_MODE", raising=False)
    _, _, checks = run(machine(images=lambda client: set()))
    assert "mmdebstrap trixie from http://archive.example/debian" in checks["debian archive"].finding
    monkeypatch.setenv("CPYTHON_PERF_BASE_MODE", "bootstrap")
    _, _, checks = run(machine(images=lambda client: set()))
    assert checks["debian archive"].finding.startswith("the base image will come from mmdebstrap trixie from")


def test_cli_doctor_is_a_subcommand(monkeypatch, capsys):
    from cpython_perf import cli

    fake = machine()
    monkeypatch.setattr(doctor, "Machine", lambda: fake)
    assert cli.main(["doctor"]) == 0
    assert "cpython-perf doctor:" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:   # a usage error: argparse's exit 2
        cli.main(["doctor", "--no-such-option"])
    assert info.value.code == 2


LINE = re.compile(r"^  (ok|warn|fail)\s+(\S.*?)\s{2,}(\S.*)$")


@pytest.mark.container
def test_doctor_for_real_on_this_machine():
    """The whole command on this machine: its structure, and its exit status against its own verdict."""
    proc = subprocess.run([sys.executable, "-m", "cpython_perf", "doctor"], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=600)
    print(proc.stdout, proc.stderr)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("cpython-perf doctor: can this machine build and check the smoke cells"), proc.stdout
    checks = {}
    for line in lines[1:-1]:
        if line.strip().startswith("fix: "):
            continue
        m = LINE.match(line)
        assert m, f"not a check line: {line!r}"
        checks[m.group(2).strip()] = m.group(1)
    assert {"docker engine", "perf capability", "sampling event", "perf_event_paranoid", "patch", "gpgv",
            "mmdebstrap", BINFMT, "disk", "build time", "debian archive"} <= set(checks)
    summary = re.fullmatch(r"(\d+) ok, (\d+) warn, (\d+) fail: (yes.*|NO: .*)", lines[-1])
    assert summary, lines[-1]
    assert proc.returncode == (1 if summary.group(4).startswith("NO") else 0), proc.stdout
    # the engine here answers (the container tests need it), so perf was probed for real
    assert checks["docker engine"] == "ok"
    assert checks["perf capability"] in ("ok", "fail")


def test_no_archive_anywhere_is_mmdebstraps_default_not_a_failure(monkeypatch):
    """A machine whose apt sources name no Debian archive (an Ubuntu runner) and no $CPYTHON_PERF_DEBIAN_ARCHIVE:
    the images come from mmdebstrap's default archive, which doctor names; nothing fails for it."""
    monkeypatch.setenv("CPYTHON_PERF_BASE_MODE", "bootstrap")
    _, _, checks = run(machine(images=lambda client: set(), archive=lambda: None))
    check = checks["debian archive"]
    assert check.status == "ok" and "mmdebstrap's default Debian archive" in check.finding
