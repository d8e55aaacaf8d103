"""`python -m cpython_perf deb-check`: is each deb lane still on the archive's newest revision?  And the
version policy of the packages the lanes build.

The version policy (said here for Debian; a distribution's revision rule is its matrix.yaml
distributions.<key>.revision).  A lane builds Debian's `<package_version>` with the series added as
`<package_version>+perfN` (N: matrix.yaml's lanes.<lane>.perf_revision, 1 unless the packages of the same
revision changed; Lane.perf_version): it sorts right above the archive's build of the same
revision, so `apt-get install`/`upgrade` from a repository that carries it prefers it to the archive's
identical-but-unpatched build, and below Debian's next update of the package (`+debNNu(K+1)`, a security or
point-release upload), so that update wins as soon as the archive has it and the user is never held on an
unfixed interpreter by this project.  `dpkg --compare-versions` decides (policy_problems).  The rule needs the
revision to end in `+debNNuK`: the first update of a release's own revision `3.11.2-6` is `3.11.2-6+deb12u1`,
which sorts BELOW `3.11.2-6+perf1` (`d` < `p`), so a lane on such a revision is refused (policy_problems).

When Debian publishes a new revision the lane is behind: the archive's `+deb12u9` sorts above the
repository's `+deb12u8+perf1`, apt takes the archive's build (without the series) and the repository's
packages are not installed any more.  This check reports it: for each lane, the newest version of its source
package in the lane's suites (the Sources indices of this machine's archive, which apt verified against the
signed InRelease, as the lanes fetch their sources) against matrix.yaml's package_version; exit 1 when a lane
is behind, 3 when the archive cannot be read, 0 when every lane is current.  The fix is to move the lane to
the new revision (package_version), rebuild it (its series must apply at fuzz 0 after the new revision's
patches) and publish the repository again.
"""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass

from ..errors import DriverError, SourceUnavailable
from ..matrix import Distribution, Lane, Matrix

EXIT_STALE = 1
EXIT_OFFLINE = 3


class ArchiveUnreadable(DriverError):
    exit_code = EXIT_OFFLINE


def compare_versions(a: str, op: str, b: str) -> bool:
    """`dpkg --compare-versions a op b` (op: lt le eq ne ge gt)."""
    proc = subprocess.run(["dpkg", "--compare-versions", a, op, b], capture_output=True, text=True)
    if proc.returncode not in (0, 1) or proc.stderr.strip():
        raise DriverError(f"dpkg --compare-versions {a} {op} {b}: {proc.stderr.strip() or proc.returncode}")
    return proc.returncode == 0


def newest(versions) -> str:
    best = None
    for v in versions:
        if best is None or compare_versions(v, "gt", best):
            best = v
    return best


def next_update_version(package_version: str, suite: str, distribution: Distribution) -> str:
    """The version the distribution's next update of this revision gets (Debian's: +debNNu(K+1), or +debNNu1
    after the release's own revision)."""
    return distribution.update_revision(package_version, suite)


def policy_problems(lane: Lane) -> list[str]:
    """Where the lane's +perf version breaks the policy (empty: it holds)."""
    ours, archive, distribution = lane.perf_version, lane.package_version, lane.distribution
    update = next_update_version(archive, lane.suite, distribution)
    problems = []
    if not distribution.update_pattern.search(archive):
        problems.append(f"{lane.name}: {archive} does not end in {distribution.revision_shape}: the rule needs an "
                        "updated revision")
    if not compare_versions(ours, "gt", archive):
        problems.append(f"{lane.name}: {ours} does not sort above the archive's {archive}")
    if not compare_versions(ours, "lt", update):
        problems.append(f"{lane.name}: {ours} does not sort below {distribution.name}'s next update {update}")
    return problems


@dataclass
class LaneState:
    lane: Lane
    newest: str | None              # the archive's newest version of the source package (None: not listed)
    newest_suite: str | None
    listed: list[tuple[str, str]]   # (version, suite) as the archive lists them
    newest_served: bool | None = None   # whether the pool serves the newest's source (None: not asked)

    @property
    def stale(self) -> bool:
        return self.newest is None or compare_versions(self.newest, "gt", self.lane.package_version)

    @property
    def lane_listed(self) -> bool:
        return any(v == self.lane.package_version for v, _ in self.listed)

    def describe(self) -> str:
        lane = self.lane
        head = f"{lane.name}: {lane.source_package} {lane.package_version}"
        if self.newest is None:
            return (f"{head}: the archive lists no {lane.source_package} in {', '.join(lane.suites)} (STALE: "
                    "the lane cannot fetch its source)")
        if not self.stale:
            ahead = "" if self.lane_listed else " (the lane's own version is not listed: ahead of the archive?)"
            return f"{head} is the archive's newest ({self.newest_suite}){ahead}"
        gone = "" if self.lane_listed else "; the lane's version is no longer listed at all"
        if self.newest_served is False:
            return (f"{head} is BEHIND the archive's {self.newest} ({self.newest_suite}){gone}: apt prefers the "
                    f"archive's build to the lane's {lane.perf_version}, but the archive's pool does not serve "
                    f"{self.newest}'s source yet (its signed Sources index lists it; the .dsc could not be "
                    "downloaded), so the lane cannot be rebuilt on it: run deb-check again later, and rebuild "
                    "when it names the steps")
        return (f"{head} is BEHIND the archive's {self.newest} ({self.newest_suite}){gone}: apt prefers the "
                f"archive's build to the lane's {lane.perf_version}. Rebuild the lane on it: set "
                f"lanes.{lane.name}.package_version to {self.newest} in matrix.yaml (perf_revision back to 1), "
                f"`nox -s {lane.session}` "
                "(the series must apply after the new revision's patches), then publish the repository "
                "(`nox -s apt-repo`)")


def lane_state(lane: Lane, versions_of=None, served=None) -> LaneState:
    """The lane against the archive; when it is behind, whether the pool serves the newer source
    (served(package, version, suites) -> bool, default source_packages.source_served)."""
    from .source_packages import archive_source_versions, source_served

    listed = (versions_of or functools.partial(archive_source_versions, distribution=lane.distribution))(
        lane.source_package, lane.suites)
    top = newest(v for v, _ in listed) if listed else None
    suite = next((s for v, s in listed if v == top), None)
    state = LaneState(lane, top, suite, listed)
    if top is not None and state.stale:
        state.newest_served = (served or functools.partial(source_served, distribution=lane.distribution))(
            lane.source_package, top, lane.suites)
    return state


def main(matrix: Matrix, lanes: list[str] | None, log=print, versions_of=None, served=None) -> int:
    """The `deb-check` command: one line a lane; exit EXIT_STALE when one is behind."""
    selected = [matrix.lane(n) for n in lanes] if lanes else list(matrix.lanes.values())
    problems = [p for lane in selected for p in policy_problems(lane)]
    states = []
    for lane in selected:
        try:
            states.append(lane_state(lane, versions_of, served))
        except SourceUnavailable as exc:
            raise ArchiveUnreadable(f"{lane.name}: cannot read the archive's Sources indices: {exc}") from None
    for state in states:
        log(state.describe())
    for problem in problems:
        log(f"version policy: {problem}")
    stale = [s.lane.name for s in states if s.stale]
    if stale or problems:
        log(f"{len(stale)} of {len(states)} lanes behind the archive{': ' + ', '.join(stale) if stale else ''}"
            + (f"; {len(problems)} version policy problems" if problems else ""))
        return EXIT_STALE
    log(f"every lane ({len(states)}) is on the archive's newest revision")
    return 0
