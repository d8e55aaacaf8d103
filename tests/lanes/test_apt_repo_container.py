"""The apt repository as a user meets it: in a pristine container of each release, served on loopback.

For every deb lane that is built (skipped, saying which session builds it, where none is), the repository is
made with apt-repo from the lane's cached packages and a throwaway key (gpg --quick-gen-key, no passphrase,
a temporary GNUPGHOME), served with `python3 -m http.server --bind 127.0.0.1` on this machine and used from
`docker run --network host` containers of cpython-perf-pristine:<suite> (mmdebstrap: python3 and
ca-certificates, the release's own suite only, as tests/test_quick_start.py makes them):

  install    one `deb [signed-by=...] http://127.0.0.1:PORT/ <suite> main` line; `apt-get install python3.X`
             installs the +perf1 build of every python3.X package it pulls in, and `-X perf` activates.
  upgrade    the archive's build of the lane's revision installed first (by exact version, from the release
             and its -security suite); then the sources are the release's suite and this repository only, so
             that the comparison is the one the version policy is about (same revision: +perf1 above it),
             and `apt-get upgrade` moves every python3.X package to +perf1.
  archive    with the -security suite kept, apt's candidate is whichever the archive's signed indices make
             newest: the archive's newer revision when deb-check reports the lane behind (bookworm's
             +deb12u9 over the lane's +deb12u8+perf1: the staleness the check reports), +perf1 otherwise.
  tampered   a byte of InRelease's signed text changed; InRelease removed and a byte of Release changed with
             the old Release.gpg kept; a byte of the python3.X .deb changed (its size kept): apt refuses each
             (BADSIG / not signed, and a hash mismatch), and installs nothing from it.
  expired    apt's clock moved past the Release's Valid-Until with libfaketime (Debian's faketime, from the
             release's archive): a day before it apt-get update takes the repository, a day after it refuses it
             as expired.
  perf       the interpreter installed from the repository (with its -dev package and a C compiler, for the
             check scripts that build a shim or an extension), with linux-perf of the lane's perf_suite, through
             the conformance suite's external target (`python -m cpython_perf external conformance
             --expect-modes` the lane's modes: the perf chain, and perf_jit where the release's perf allows).
"""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from cpython_perf.lanes import apt_repo
from cpython_perf.lanes import deb_check
from cpython_perf.errors import DriverError
from cpython_perf.matrix import PROJECT_ROOT, load_matrix

pytestmark = pytest.mark.container

MATRIX = load_matrix()
LANES = list(MATRIX.lanes.values())
KEYRING_IN = "/etc/apt/keyrings/cpython-perf.gpg"
CHECK_IMAGE = "cpython-perf-aptrepo-check"


def lane_packages(lane) -> list[str]:
    """The packages `apt-get install python3.X` pulls in from the lane's source package."""
    v = lane.version
    return [f"python{v}", f"python{v}-minimal", f"libpython{v}-stdlib", f"libpython{v}-minimal"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module", params=LANES, ids=lambda lane: lane.name)
def served(request, tmp_path_factory):
    """The lane's repository (and its tampered copies) made with a throwaway key and served on loopback."""
    lane = request.param
    if apt_repo.find_lane_build(lane) is None:
        pytest.skip(f"{lane.name} is not built here: `nox -s {lane.session}` (or `-- --no-checks`) builds it")
    try:
        build = apt_repo.find_lane_build(lane, current=apt_repo.current_keys()(lane))
    except DriverError as exc:
        pytest.skip(f"{lane.name}: its source package cannot be had here to check the build's inputs: {exc}")
    if build is None:
        pytest.skip(f"{lane.name} was built from other inputs than its current ones (the series or the .dsc "
                    f"changed since): `nox -s {lane.session}` builds it again")
    for tool in ("reprepro", "gpg", "gpgv"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (apt-get install reprepro gnupg gpgv)")
    root = tmp_path_factory.mktemp(f"apt-{lane.name}")
    home = Path(tempfile.mkdtemp(prefix="cpython-perf-gpgtest-"))
    server = None
    try:
        subprocess.run(["gpg", "--homedir", str(home), "--batch", "--passphrase", "", "--quick-gen-key",
                        "cpython-perf apt test <apt-test@example.invalid>", "ed25519", "sign",
                        # valid beyond the Release's Valid-Until: test_apt_refuses_... is about the Release's expiry
                        f"{2 * apt_repo.DEFAULT_VALID_FOR_DAYS}d"],
                       check=True, capture_output=True)
        with apt_repo.signing_key(apt_repo.secret_fingerprints(home)[0], gnupghome=str(home), environ={}) as key:
            apt_repo.build_repository([build], key, root / "good", log=print)
        suite = root / "good" / "dists" / lane.suite
        # a byte of the signed text of InRelease changed
        shutil.copytree(root / "good", root / "inrelease")
        text = (root / "inrelease" / "dists" / lane.suite / "InRelease").read_bytes()
        flip_byte(root / "inrelease" / "dists" / lane.suite / "InRelease", text.index(b"Description: ") + 13)
        # no InRelease; a byte of Release changed, the old Release.gpg kept
        shutil.copytree(root / "good", root / "release")
        (root / "release" / "dists" / lane.suite / "InRelease").unlink()
        text = (suite / "Release").read_bytes()
        flip_byte(root / "release" / "dists" / lane.suite / "Release", text.index(b"Description: ") + 13)
        # a byte of the interpreter's .deb changed, its size kept
        shutil.copytree(root / "good", root / "deb")
        deb = next((root / "deb" / "pool").rglob(f"python{lane.version}_*.deb"))
        flip_byte(deb, deb.stat().st_size // 2)
        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory",
                                   str(root), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(50):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                conn.request("HEAD", f"/good/dists/{lane.suite}/InRelease")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail("http.server did not answer")
        yield {"lane": lane, "root": root, "url": f"http://127.0.0.1:{port}", "build": build}
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def pristine(docker_client):
    from tests.test_quick_start import pristine_image

    return lambda suite: pristine_image(docker_client, suite)


def archive_line(suite: str) -> str:
    """This machine's archive entry for a suite (-security from its security archive), as the lanes use it."""
    from cpython_perf.lanes.images import archive_lines
    from cpython_perf.lanes.source_packages import archive_entries

    debian = MATRIX.distributions["debian"]
    line = archive_lines(debian, [suite], archive_entries(debian))[0]
    return line.replace("deb ", "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ", 1)


def transcript(lane, what: str, text: str) -> None:
    """The container's output, kept in results/apt-repo/<lane>/<what>.txt (gitignored)."""
    keep = PROJECT_ROOT / "results" / "apt-repo" / lane.name
    keep.mkdir(parents=True, exist_ok=True)
    (keep / f"{what}.txt").write_text(text)


def in_container(image: str, served: dict, script: str, what: str, name: str | None = None, keep: bool = False):
    cmd = ["docker", "run", "--network", "host", "-e", "DEBIAN_FRONTEND=noninteractive",
           "-v", f"{served['root'] / 'good' / apt_repo.KEYRING}:{KEYRING_IN}:ro"]
    cmd += ["--name", name] if name else []
    cmd += [] if keep else ["--rm"]
    done = subprocess.run([*cmd, image, "sh", "-xc", script], capture_output=True, text=True, timeout=1800)
    transcript(served["lane"], what, f"$ docker run ... {image}\n{done.stdout}\n--- stderr (sh -x: the commands)\n"
                                     f"{done.stderr}\nexit {done.returncode}\n")
    return done


def our_line(served: dict, variant: str = "good") -> str:
    return (f"echo 'deb [signed-by={KEYRING_IN}] {served['url']}/{variant}/ {served['lane'].suite} main' "
            "> /etc/apt/sources.list.d/cpython-perf.list")


def versions_in(output: str) -> dict[str, str]:
    return dict(line.split()[1:3] for line in output.splitlines() if line.startswith("PKG "))


SHOW = "dpkg-query -W -f 'PKG ${Package} ${Version} ${db:Status-Abbrev}\\n' 'python3*' 'libpython3*' | grep 'ii *$'"


def test_one_source_line_and_apt_get_install_give_the_perf_build(served, pristine):
    lane = served["lane"]
    script = f"""set -e
{our_line(served)}
apt-get update -q
apt-get install -y -q python{lane.version}
{SHOW}
python{lane.version} -X perf -c 'import sys; print("TRAMPOLINE", sys.is_stack_trampoline_active())'
"""
    done = in_container(pristine(lane.suite), served, script, "install")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    installed = versions_in(done.stdout)
    ours = lane.perf_version
    assert {p: installed.get(p) for p in lane_packages(lane)} == {p: ours for p in lane_packages(lane)}
    assert "TRAMPOLINE True" in done.stdout


def test_apt_get_upgrade_moves_the_archives_build_of_the_same_revision_to_the_perf_build(served, pristine):
    lane = served["lane"]
    security = [s for s in lane.suites if s != lane.suite]
    pins = " ".join(f"{p}={lane.package_version}" for p in lane_packages(lane))
    extra = "".join(f"echo '{archive_line(s)}' >> /etc/apt/sources.list.d/archive-updates.list\n" for s in security)
    script = f"""set -e
{extra}apt-get update -q
apt-get install -y -q {pins}
echo BEFORE; {SHOW}
rm -f /etc/apt/sources.list.d/archive-updates.list
{our_line(served)}
apt-get update -q
apt-get upgrade -y -q
echo AFTER; {SHOW}
"""
    done = in_container(pristine(lane.suite), served, script, "upgrade")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    before, after = done.stdout.split("AFTER", 1)
    assert {p: versions_in(before)[p] for p in lane_packages(lane)} == {p: lane.package_version for p in lane_packages(lane)}
    ours = lane.perf_version
    assert {p: versions_in(after)[p] for p in lane_packages(lane)} == {p: ours for p in lane_packages(lane)}


def test_with_the_security_suite_apt_takes_what_deb_check_calls_newest(served, pristine):
    lane = served["lane"]
    state = deb_check.lane_state(lane)
    expected = state.newest if state.stale else lane.perf_version
    extra = "".join(f"echo '{archive_line(s)}' >> /etc/apt/sources.list.d/archive-updates.list\n"
                    for s in lane.suites if s != lane.suite)
    script = f"""set -e
{extra}{our_line(served)}
apt-get update -q
apt-cache policy python{lane.version} | sed -n 's/^ *Candidate: /CANDIDATE /p'
"""
    done = in_container(pristine(lane.suite), served, script, "with-security")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"CANDIDATE {expected}\n" in done.stdout, (state.describe(), done.stdout[-2000:])


def test_deb_check_downloads_the_dsc_of_the_lanes_own_revision(served):
    """source_served, which deb-check asks when a lane is behind, with the archive for real: the revision the
    lane was built from is served (its source was fetched from there), a revision nobody published is not."""
    from cpython_perf.lanes.source_packages import source_served
    from cpython_perf.errors import SourceUnavailable

    lane = served["lane"]
    assert source_served(lane.source_package, lane.package_version, lane.suites, lane.distribution)
    with pytest.raises(SourceUnavailable, match="is not listed"):
        source_served(lane.source_package, lane.package_version + "+nosuchrevision1", lane.suites,
                      lane.distribution)


# apt's words: gpgv's BADSIG (bookworm), sqv's "Message has been manipulated" (trixie), then "is not signed"
SIGNATURE_REFUSED = r"(BADSIG|signatures were invalid|has been manipulated)(.|\n)*is not signed"


@pytest.mark.parametrize("variant, refusal", [
    ("inrelease", SIGNATURE_REFUSED),
    ("release", SIGNATURE_REFUSED),
    ("deb", r"(Hash Sum mismatch|Hashes of expected file)"),
], ids=["inrelease", "release", "deb"])
def test_apt_refuses_a_tampered_repository(served, pristine, variant, refusal):
    import re

    lane = served["lane"]
    script = f"""{our_line(served, variant)}
apt-get update -q 2>&1; echo "UPDATE $?"
apt-get install -y -q python{lane.version} 2>&1; echo "INSTALL $?"
{SHOW} || true
"""
    done = in_container(pristine(lane.suite), served, script, f"tampered-{variant}")
    out = done.stdout + done.stderr
    assert re.search(refusal, out), out[-3000:]
    ours = lane.perf_version
    assert ours not in "".join(line for line in out.splitlines() if line.startswith("PKG ")), out[-3000:]
    if variant != "deb":
        assert "UPDATE 0" not in out, "apt-get update must fail on a repository whose signature does not verify"
    else:
        assert "INSTALL 0" not in out


def test_apt_refuses_the_repository_once_its_valid_until_has_passed(served, pristine):
    """The Release's Valid-Until is its Date plus apt_repo.DEFAULT_VALID_FOR_DAYS.  apt's clock is moved with
    libfaketime (the container's own clock is the host's): a day before Valid-Until apt-get update takes the
    repository, a day after it refuses it as expired.  The throwaway key outlives both (twice the period), so
    the refusal is the Release's own, not an expired key's."""
    import re

    lane = served["lane"]
    days = apt_repo.DEFAULT_VALID_FOR_DAYS
    policy = f"apt-cache policy python{lane.version} | sed -n 's/^ *Candidate: /CANDIDATE /p'"
    # expired first, while apt has no lists of the repository (apt keeps the lists of its last valid Release
    # when a new one is refused)
    script = f"""apt-get update -q >/dev/null 2>&1; apt-get install -y -q faketime >/dev/null 2>&1; echo "FAKETIME $?"
{our_line(served)}
faketime -f '+{days + 1}d' apt-get update 2>&1; echo "AFTER $?"
{policy}
echo SPLIT
faketime -f '+{days - 1}d' apt-get update 2>&1; echo "BEFORE $?"
{policy}
"""
    done = in_container(pristine(lane.suite), served, script, "expired")
    out = done.stdout
    assert "FAKETIME 0" in out, out[-3000:]
    after, before = out.split("SPLIT", 1)
    assert re.search(rf"Release file for {re.escape(served['url'])}/good/dists/{lane.suite}/InRelease is expired", after), \
        after[-3000:]
    assert "AFTER 0" not in after and "EXPKEYSIG" not in out
    assert "CANDIDATE " in after and f"CANDIDATE {lane.perf_version}" not in after, \
        "nothing of the expired repository is used"
    assert "BEFORE 0" in before and "expired" not in before, before[-3000:]
    assert f"CANDIDATE {lane.perf_version}" in before


def test_the_installed_interpreter_passes_the_conformance_external_target(served, pristine, tmp_path):
    lane = served["lane"]
    perf = "linux-perf" if lane.perf_suite == lane.suite else f"linux-perf/{lane.perf_suite}"
    extra = "" if lane.perf_suite == lane.suite else \
        f"echo '{archive_line(lane.perf_suite)}' > /etc/apt/sources.list.d/perf.list\n"
    name = f"cpython-perf-aptrepo-{lane.name}-{os.getpid()}"
    image = f"{CHECK_IMAGE}:{lane.name}-{os.getpid()}"
    script = f"""set -e
{extra}{our_line(served)}
apt-get update -q
apt-get install -y -q python{lane.version} python{lane.version}-dev gcc libc6-dev {perf}
{SHOW}
"""
    try:
        done = in_container(pristine(lane.suite), served, script, "perf-image", name=name, keep=True)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert versions_in(done.stdout)[f"python{lane.version}"] == lane.perf_version
        subprocess.run(["docker", "commit", name, image], check=True, capture_output=True)
        run = subprocess.run([sys.executable, "-m", "cpython_perf", "external", "conformance", "--image", image,
                              "--python", lane.python, "--expect-modes", ",".join(lane.modes),
                              "--results", str(tmp_path)], cwd=PROJECT_ROOT, capture_output=True, text=True,
                             timeout=3600, env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)))
        transcript(lane, "conformance", run.stdout + run.stderr)
        assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
        assert " passed" in run.stdout and " failed" not in run.stdout.splitlines()[-1]
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True)
