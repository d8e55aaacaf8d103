"""Which event perf samples with on this host: perf's default, or cpu-clock where the PMU gives nothing.

Some hosts open the hardware cycles event and then deliver no sample at all
(GitHub's ubuntu-24.04-arm runners: actions/runner-images#11689).  perf's own
fallback (and samply's) only acts when *opening* the event fails, so there a
recording silently holds nothing.  The probe asks the host once: a short busy
loop recorded with perf's default event in a container with the perf
capability; no sample -> the same loop with `-e cpu-clock`, the software
timer every kernel has.  The chosen event is what every recording of the
conformance suite passes to perf record (perf_runs.record_options, and the
check scripts through $CPYTHON_PERF_EVENT), what the suite records in its JUnit
files (property perf_event, shown by the report), and what `doctor` reports.

$CPYTHON_PERF_PROBE_EVENT names the event tried first instead of perf's
default: the fallback's test sets it to `dummy`, an event that never fires;
`cpu-clock` there forces every recording onto cpu-clock.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Callable

from ..errors import RuntimeFailure

PROBE_EVENT_ENV = "CPYTHON_PERF_PROBE_EVENT"
FALLBACK_EVENT = "cpu-clock"
PROBE_SECONDS = 0.3
PROBE_DATA = "/tmp/perf-event-probe.data"


class NoSamples(RuntimeFailure):
    """Neither perf's default event nor cpu-clock samples a busy loop here."""


@dataclass(frozen=True)
class Attempt:
    """One probe recording: the event asked for (None: perf's default), what perf recorded with, how many samples."""

    event: str | None
    name: str
    samples: int
    error: str = ""

    @property
    def asked(self) -> str:
        return self.event or "perf's default event"


@dataclass(frozen=True)
class EventChoice:
    """The event every recording on this host uses (event None: perf's default) and the probe behind it."""

    event: str | None
    attempts: tuple[Attempt, ...]

    @property
    def chosen(self) -> Attempt:
        return self.attempts[-1]

    @property
    def fell_back(self) -> bool:
        return len(self.attempts) > 1

    def record_options(self) -> list[str]:
        """perf record's event option: none for perf's default, else -e EVENT."""
        return ["-e", self.event] if self.event else []

    @property
    def label(self) -> str:
        """One line for JUnit and the report, e.g. `default (cycles:P)`, `cpu-clock (default: 0 samples)`."""
        if not self.fell_back:
            first = self.attempts[0]
            return f"default ({first.name})" if first.event is None else f"{first.event} (forced)"
        first = self.attempts[0]
        why = first.error[:60] or f"{first.samples} samples"
        return f"{self.event} ({'default' if first.event is None else first.event}: {why})"


def probe_command(event: str | None = None, perf: str = "perf", seconds: float = PROBE_SECONDS,
                  data: str = PROBE_DATA) -> str:
    """Shell script recording a busy loop of seconds with event (None: perf's default); it prints
    `event NAME` (perf evlist) and `samples N`.  Plain sh and coreutils: runs in the base image too."""
    perf = shlex.quote(perf)
    event_option = f"-e {shlex.quote(event)} " if event else ""
    loop = shlex.quote(f"timeout {seconds} sh -c 'while :; do :; done'; exit 0")
    return "\n".join([
        f"rm -f {data}",
        f"{perf} record -q {event_option}-o {data} -- sh -c {loop} 2> /tmp/perf-event-probe.err",
        'rc=$?; [ $rc -eq 0 ] || { echo "error exit $rc: $(head -c 300 /tmp/perf-event-probe.err | tr \'\\n\' \' \')"; '
        "echo samples 0; exit 0; }",
        f'echo "event $({perf} evlist -i {data} 2>/dev/null | paste -sd, -)"',
        f'echo "samples $({perf} script -i {data} 2>/dev/null | wc -l)"',
    ]) + "\n"


def parse_probe(event: str | None, output: str) -> Attempt:
    """The Attempt a probe_command printed."""
    name, samples, error = "", 0, ""
    for line in output.splitlines():
        key, _, value = line.strip().partition(" ")
        if key == "event":
            name = value.strip()
        elif key == "samples" and value.strip().isdigit():
            samples = int(value)
        elif key == "error":
            error = " ".join(line.split()[1:])[:200]
    return Attempt(event, name or event or "?", samples, error)


def choose_event(record: Callable[[str | None], Attempt], first: str | None = None) -> EventChoice:
    """The decision: record(first) (None: perf's default event); samples -> that event; none (or the
    event cannot be opened) -> cpu-clock, when it samples; neither -> NoSamples."""
    tried = record(first)
    if tried.samples > 0:
        return EventChoice(first, (tried,))
    if first == FALLBACK_EVENT:
        raise NoSamples(_no_samples((tried,)))
    fallback = record(FALLBACK_EVENT)
    if fallback.samples > 0:
        return EventChoice(FALLBACK_EVENT, (tried, fallback))
    raise NoSamples(_no_samples((tried, fallback)))


def _no_samples(attempts) -> str:
    said = "; ".join(f"{a.asked}: {a.error or f'{a.samples} samples'}" for a in attempts)
    return (f"perf records no sample of a {PROBE_SECONDS} s busy loop here ({said}). "
            "Fix: check that the kernel's perf events work (perf record -e cpu-clock -- sleep 1 as root on the host), "
            "that the container has the perf capability, and kernel.perf_event_paranoid.")


def first_event() -> str | None:
    """The event the probe tries first: $CPYTHON_PERF_PROBE_EVENT, else perf's default (None)."""
    return os.environ.get(PROBE_EVENT_ENV, "").strip() or None


def probe_in(run: Callable[[str], object], first: str | None = None, perf: str = "perf") -> EventChoice:
    """choose_event with the recordings run by run(shell) -> a result with stdout and exit_code (a container
    with the perf capability: containers.run, a conformance runner)."""
    def record(event):
        result = run(probe_command(event, perf))
        if result.exit_code != 0:
            return Attempt(event, event or "?", 0, f"the probe's container failed (exit {result.exit_code}): "
                                                    f"{(result.stderr or result.stdout)[-300:]}")
        return parse_probe(event, result.stdout)
    return choose_event(record, first)


_host_cache: dict[tuple, EventChoice | NoSamples] = {}


def host_event(client, image: str, cap: str | None, perf: str = "perf") -> EventChoice:
    """The event of this host's engine, probed once a process (in image, with perf capability cap);
    the override of $CPYTHON_PERF_PROBE_EVENT is part of the key.  Raises NoSamples."""
    from ..run import containers

    first = first_event()
    key = (client.api.base_url, first)
    if key not in _host_cache:
        try:
            _host_cache[key] = probe_in(
                lambda shell: containers.run(client, image, shell, workdir="/tmp", cap_add=[cap] if cap else [],
                                             timeout=120), first, perf)
        except NoSamples as exc:
            _host_cache[key] = exc
    got = _host_cache[key]
    if isinstance(got, NoSamples):
        raise got
    return got
