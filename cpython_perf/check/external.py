"""Any interpreter, any image: which perf mode works with a given interpreter in a given image, and why not.

A target is not a matrix cell: an image (anyone's) and the path of a Python
in it.  `pytest conformance --image IMAGE --python PATH [--expect-modes
perf,perf_jit]` (or `nox -s conformance-image -- ...`, which runs
`python -m cpython_perf external conformance ...` and keeps the JUnit under
results/external-<name>/) records the seed script for real with the image's
own perf in each perf mode, with the same runner, command lines
(cpython_perf.record.perf_runs) and bars (conftest.assert_chain) as the matrix
cells, and says whether the mode works there; where it does not, why, from
facts gathered in the image, never guessed:

  no perf in the image          no working perf command (a Debian /usr/bin/perf wrapper that refuses a kernel
                                whose linux-perf-X.Y is not installed: perf_X.Y is used where present)
  perf not permitted            perf_event_open refused with every capability tried (containers.perf_capability)
  no trampoline                 no sys.activate_stack_trampoline, -X perf wrote no /tmp/perf-PID.map,
                                sysconfig PY_HAVE_PERF_TRAMPOLINE unset
  backend not available         the interpreter refuses the backend (perf_jit before 3.13)
  perf too old                  perf_jit needs perf >= 6.8 for `perf inject --jit` (the howto's note)
  sys API refuses               -X works, sys.activate_stack_trampoline refuses the backend (3.13.5's
                                perf_jit, gh-141579)
  no frame pointers             -X perf works (the map is written) but frame-pointer unwinding does not
                                reach the Python frames: _PyEval_EvalFrameDefault's prologue (objdump
                                on the host of the image's own binary) sets up no frame pointer, and
                                the build's CFLAGS (sysconfig) lack -fno-omit-frame-pointer

A mode works when the chain shows with -X; the environment variable and the
sys API are recorded too.  With --expect-modes a mode must work with all three
activations or it fails; without, a mode that does not work with -X is skipped
with the diagnosis (never passed), and one that works with -X passes, the
activations that did not work (and why) kept as its caveat.  The check
scripts (conformance/scripts/check_*.py) run with the target's python too:
those needing a claimed mode always, the others where the interpreter offers
the backends they need.  The report (cpython_perf.report.external_targets)
shows one row per (image, python, mode) under "External interpreters".

`python -m cpython_perf external image --suite trixie --package python3.13`
bootstraps a stock Debian image (that suite's interpreter and linux-perf) the
way the project's bases are (mmdebstrap from the machine's own archive entry,
`docker import`); `--perf-suite bookworm-backports` takes linux-perf from
that suite of the same archive.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .. import host
from ..errors import DriverError
from ..arches import ARCH_FACTS, DEFAULT_ARCH, HOST_ARCH
from ..matrix import NATIVE_SINCE, PERF_MODES, PROJECT_ROOT, Variant
from ..record.perf_runs import EVAL_FUNCTION, frame_allocation
from ..subcommands import Command, main_of, pass_unknown_arguments

# `perf inject --jit` as perf_jit needs it: perf >= 6.8 (the howto's note; matrix.yaml base_suite,
# conformance/test_build_shape.test_perf_is_new_enough)
PERF_JIT_MIN_PERF = (6, 8)
FRAME_POINTER_FLAG = "-fno-omit-frame-pointer"
# The compile flags sysconfig records, in the order the build uses them (later flags win)
CFLAG_VARS = ("CFLAGS", "PY_CFLAGS", "PY_CFLAGS_NODIST", "CONFIGURE_CFLAGS", "CONFIGURE_CFLAGS_NODIST")
EXTERNAL_VARIANT = Variant(name="external", description="an interpreter not built by this project", cflags="")
STOCK_IMAGE_REPOSITORY = "cpython-perf-stock"

# Codes of the reasons a mode does not work (Reason.code), in the order they are given
NO_PERF, NOT_PERMITTED, NO_TRAMPOLINE, NO_BACKEND, PERF_TOO_OLD, NO_FRAME_POINTERS, UNEXPLAINED = (
    "no-perf", "perf-not-permitted", "no-trampoline", "backend-not-available", "perf-too-old",
    "no-frame-pointers", "unexplained")
SYS_API_REFUSES, RECORDING_FAILED, NEEDS_ADDR2LINE = "sys-api-refuses", "recording-failed", "perf-needs-addr2line"


@dataclass(frozen=True)
class ExternalTarget:
    """An interpreter in an image, checked like a cell but not one: the image is used as it is.

    Duck-types the parts of matrix.Cell the runners and perf_runs read (foreign, variant, vanilla,
    backends, modes, arch_facts: the host's, whose Docker runs the image)."""

    image: str
    python: str
    expect_modes: tuple[str, ...] | None = None   # None: diagnose only (a mode that does not work is skipped)
    # the catalogued defects it is known to carry (matrix.yaml stock:); None: not described, any may be present
    carries: tuple[str, ...] | None = None
    stock: str | None = None     # its name in matrix.yaml's stock:, where it is one
    # (mode, diagnosis code) of the modes matrix.yaml's stock: says it does not give, and why
    not_given: tuple[tuple[str, str], ...] = ()
    jit: bool = False            # built with the experimental JIT (off by default): modes run with PYTHON_JIT=1 too
    foreign = False
    vanilla = False
    build_only = False
    variant = EXTERNAL_VARIANT
    modes = PERF_MODES
    arch_facts = ARCH_FACTS.get(HOST_ARCH) or ARCH_FACTS[DEFAULT_ARCH]

    @property
    def name(self) -> str:
        return target_name(self.image, self.python)

    @property
    def backends(self) -> tuple[str, ...]:
        """What the check scripts may use: the claimed modes; without claims every backend (a check needing
        one the interpreter does not offer is skipped at run time, check_skip_reason)."""
        return self.expect_modes if self.expect_modes is not None else PERF_MODES

    @property
    def check_backends(self) -> tuple[str, ...]:
        """What the check scripts may use: the claimed modes, and a mode matrix.yaml's stock: says is not given
        for a reason that leaves its backend working (no frame pointers to unwind it: the trampoline still maps,
        so a check that does not record a chain still has something to say)."""
        working = [m for m, why in self.not_given if why in (NO_FRAME_POINTERS, PERF_TOO_OLD)]
        return tuple(m for m in PERF_MODES if m in self.backends or m in working)

    def expects(self, mode: str) -> bool:
        return self.expect_modes is not None and mode in self.expect_modes

    def why_not(self, mode: str) -> str | None:
        """The diagnosis code matrix.yaml's stock: gives for a mode it does not give (None: no such claim)."""
        return dict(self.not_given).get(mode)


def target_name(image: str, python: str) -> str:
    """A name for ids and results/external-<name>/: image and python path, other characters as '-'."""
    return re.sub(r"[^A-Za-z0-9._]+", "-", f"{image}-{python}").strip("-")


def parse_modes(text: str | None) -> tuple[str, ...] | None:
    """--expect-modes "perf,perf_jit" -> ("perf", "perf_jit"); None stays None; unknown modes are an error."""
    if text is None:
        return None
    modes = tuple(m for m in re.split(r"[,\s]+", text) if m)
    unknown = [m for m in modes if m not in PERF_MODES]
    if unknown:
        raise ValueError(f"unknown perf mode(s) {', '.join(unknown)} (known: {', '.join(PERF_MODES)})")
    return modes


# --------------------------------------------------------------------------
# Facts gathered in the image


# Run with the target's python (any version from 3.6 on, stdlib only): what it offers, how it was built.
PYTHON_PROBE = r'''
import json, os, platform, subprocess, sys, sysconfig
out = {"version": list(sys.version_info[:3]), "executable": sys.executable,
       "realpath": os.path.realpath(sys.executable), "machine": platform.machine(),
       "sys_api": hasattr(sys, "activate_stack_trampoline"), "activation": {}, "xoption": {}}
for backend in ("perf", "perf_jit"):
    if not out["sys_api"]:
        out["activation"][backend] = "sys.activate_stack_trampoline does not exist"
        continue
    code = ("import sys; sys.activate_stack_trampoline(%r); "
            "print(sys.is_stack_trampoline_active())" % backend)
    p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if p.returncode == 0 and p.stdout.strip() == "True":
        out["activation"][backend] = "ok"
    else:
        said = (p.stderr.strip().splitlines() or [p.stdout.strip() or "exit %d" % p.returncode])[-1]
        out["activation"][backend] = said
child = "import os\ndef f():\n    return 1\nf()\nprint(os.getpid())"
for backend, pattern in (("perf", "/tmp/perf-%d.map"), ("perf_jit", "/tmp/jit-%d.dump")):
    p = subprocess.run([sys.executable, "-X", backend, "-c", child], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    got = {"exit": p.returncode, "stderr": p.stderr[-400:], "file": None, "exists": False, "bytes": 0,
           "python_entries": 0}
    if p.returncode == 0 and p.stdout.strip().isdigit():
        path = pattern % int(p.stdout.strip())
        got["file"] = path
        if os.path.exists(path):
            got["exists"] = True
            data = open(path, "rb").read()
            got["bytes"] = len(data)
            got["python_entries"] = data.count(b"py::")
    out["xoption"][backend] = got
names = ("PY_HAVE_PERF_TRAMPOLINE", "CFLAGS", "PY_CFLAGS", "PY_CFLAGS_NODIST", "CONFIGURE_CFLAGS",
         "CONFIGURE_CFLAGS_NODIST", "OPT", "CONFIG_ARGS", "Py_ENABLE_SHARED", "LDLIBRARY", "LIBDIR", "INSTSONAME")
out["config"] = {n: sysconfig.get_config_var(n) for n in names}
mapped = []
with open("/proc/self/maps") as f:
    for line in f:
        parts = line.split()
        name = os.path.basename(parts[5]) if len(parts) >= 6 else ""
        if "x" in parts[1] and name.startswith(("python", "libpython")) and parts[5] not in mapped:
            mapped.append(parts[5])
out["mapped"] = mapped
try:   # the cpython-perf series exports _PyPerf_RemoteRequest (the switch from outside); CPython as released does not
    import ctypes
    out["series"] = hasattr(ctypes.pythonapi, "_PyPerf_RemoteRequest")
except Exception:   # no ctypes in the image: unknown
    out["series"] = None
print(json.dumps(out))
'''

# Every perf command the image has: `perf` on PATH, then Debian's versioned perf_X.Y binaries, newest first.
PERF_PROBE = r'''
for p in perf $(ls /usr/bin/perf_[0-9]* 2>/dev/null | sort -V -r); do
  if command -v "$p" >/dev/null 2>&1; then
    out=$("$p" version 2>&1); rc=$?
    printf '%s\t%s\t%s\n' "$p" "$rc" "$(printf '%s' "$out" | head -n 3 | tr '\n\t' '  ')"
  else
    printf '%s\tmissing\t\n' "$p"
  fi
done
'''
_PERF_VERSION = re.compile(r"perf version ((\d+)\.(\d+)\S*)")


@dataclass
class PerfFacts:
    command: str | None                     # the perf command to use; None: none works
    version: tuple[int, int] | None = None
    version_text: str = ""                  # e.g. 6.12.117
    notes: list[str] = field(default_factory=list)   # what else was found (a refusing wrapper)


def parse_perf_candidates(text: str) -> PerfFacts:
    """The PERF_PROBE output -> the first perf command that answers `version` with a version."""
    notes, chosen = [], None
    for line in text.splitlines():
        name, _, rest = line.partition("\t")
        rc, _, said = rest.partition("\t")
        if not name:
            continue
        if rc == "missing":
            continue
        m = _PERF_VERSION.search(said)
        if rc == "0" and m and chosen is None:
            chosen = PerfFacts(name, (int(m.group(2)), int(m.group(3))), m.group(1))
        elif chosen is None:
            notes.append(f"`{name} version` answered (exit {rc}): {said.strip() or 'nothing'}")
    if chosen is None:
        return PerfFacts(None, notes=notes)
    if notes:
        chosen.notes = notes + [f"using {chosen.command}"]
    return chosen


@dataclass
class EvalLoopFacts:
    """_PyEval_EvalFrameDefault's prologue in the image's binary, disassembled on the host."""

    binary: str | None = None              # the file (in the image) that holds the function
    frame_pointer: bool | None = None      # the prologue sets up a frame pointer; None: not known
    prologue: list[str] = field(default_factory=list)   # its first instructions
    frame_bytes: int | None = None         # the stack it reserves (dwarf reach)
    note: str = ""                         # why it is not known


@dataclass
class TargetFacts:
    python: dict                           # PYTHON_PROBE's JSON
    perf: PerfFacts
    capability: str | None = None          # the capability perf needs here
    refusal: str | None = None             # why perf is not permitted
    eval_loop: EvalLoopFacts = field(default_factory=EvalLoopFacts)

    @property
    def version(self) -> tuple[int, ...]:
        return tuple(self.python.get("version") or ())

    @property
    def version_text(self) -> str:
        return ".".join(str(v) for v in self.version) or "unknown"

    def offers_sys_api(self, backend: str) -> bool:
        """sys.activate_stack_trampoline(backend) activates it."""
        return self.python.get("activation", {}).get(backend) == "ok"

    def offers_xoption(self, backend: str) -> bool:
        """-X backend writes its map / dump with py:: entries."""
        return bool(self.python.get("xoption", {}).get(backend, {}).get("python_entries"))

    def offers(self, backend: str) -> bool:
        """The interpreter has the backend, one way or the other (3.13.5's sys API refuses perf_jit, -X takes it)."""
        return self.offers_sys_api(backend) or self.offers_xoption(backend)

    @property
    def has_series(self) -> bool | None:
        """Whether the interpreter carries the cpython-perf series (its _PyPerf_RemoteRequest); None: unknown."""
        return self.python.get("series")

    def properties(self) -> dict[str, str]:
        """What a test records of the target (JUnit properties, read back by the report)."""
        return {
            "python_version": self.version_text,
            "perf_version": self.perf.version_text or "none",
            "perf_command": self.perf.command or "",
            "perf_capability": self.capability or "",
            "trampoline_api": str(bool(self.python.get("sys_api"))),
            "cpython_perf_series": str(self.has_series),
            "PY_HAVE_PERF_TRAMPOLINE": str(self.python.get("config", {}).get("PY_HAVE_PERF_TRAMPOLINE")),
            "cflags_frame_pointers": str(cflags_frame_pointers(self.python.get("config", {}))),
            "eval_frame_pointer": str(self.eval_loop.frame_pointer),
            "eval_frame_bytes": str(self.eval_loop.frame_bytes),
        }


def cflags_frame_pointers(config: dict) -> bool | None:
    """Whether the build's compile flags (sysconfig) keep frame pointers: the last -f(no-)omit-frame-pointer
    wins; without either, only at -O0 (the last -O option; GCC and clang omit them from -O1 on x86-64 and
    aarch64); None without flags.  The check scripts in the images judge the same way
    (conformance/scripts/childcheck.py built_with_frame_pointers, stdlib only)."""
    flags = " ".join(str(config.get(name) or "") for name in CFLAG_VARS).split()
    if not flags:
        return None
    explicit = [flag for flag in flags if flag in (FRAME_POINTER_FLAG, "-fomit-frame-pointer")]
    if explicit:
        return explicit[-1] == FRAME_POINTER_FLAG
    levels = [flag for flag in flags if flag.startswith("-O")]
    return bool(levels) and levels[-1] == "-O0"


def optimisation_flags(config: dict) -> list[str]:
    """The -O and -f flags of the build's compile flags (sysconfig), each once, in order."""
    seen: list[str] = []
    for flag in " ".join(str(config.get(name) or "") for name in CFLAG_VARS).split():
        if flag.startswith(("-O", "-f")) and flag not in seen:
            seen.append(flag)
    return seen


_FP_SETUP = (re.compile(r"\bmov\s+%rsp,%rbp\b"),            # x86-64: push %rbp; mov %rsp,%rbp
             re.compile(r"\bmov\s+x29,\s*sp\b"),             # aarch64: stp x29, x30, [sp, ...]!; mov x29, sp
             re.compile(r"\badd\s+x29,\s*sp,"))
_INSTRUCTION = re.compile(r"^\s*[0-9a-f]+:\s+(.*\S)\s*$")
PROLOGUE_INSTRUCTIONS = 16


def prologue_sets_frame_pointer(disassembly: str) -> tuple[bool | None, list[str]]:
    """Whether the first instructions of a disassembled function set up a frame pointer, and those
    instructions (None: no instruction found)."""
    instructions = [m.group(1) for line in disassembly.splitlines() if (m := _INSTRUCTION.match(line))]
    head = instructions[:PROLOGUE_INSTRUCTIONS]
    if not head:
        return None, []
    return any(p.search(i) for i in head for p in _FP_SETUP), head


def symbol_address(dynamic_symbols: str, symbol: str = EVAL_FUNCTION) -> int | None:
    """The address of symbol in `objdump -T` (or -t) output."""
    for line in dynamic_symbols.splitlines():
        words = line.split()
        if words and words[-1] == symbol and re.fullmatch(r"[0-9a-f]+", words[0]) and re.search(r"\sD?F\s", line):
            return int(words[0], 16)
    return None


def disassemble_eval_loop(path: Path, symbol: str = EVAL_FUNCTION, length: int = 0x300) -> str | None:
    """objdump of symbol's first bytes in the file (found in its dynamic or static symbol table)."""
    for table in ("-T", "-t"):
        listing = subprocess.run(["objdump", table, str(path)], capture_output=True, text=True)
        address = symbol_address(listing.stdout, symbol)
        if address is not None:
            proc = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={address:#x}",
                                   f"--stop-address={address + length:#x}", str(path)],
                                  capture_output=True, text=True)
            return proc.stdout if proc.returncode == 0 else None
    return None


def eval_loop_facts(files: dict[str, Path]) -> EvalLoopFacts:
    """Disassemble the eval loop in the first of files (image path -> host copy) that has it."""
    for image_path, host_path in files.items():
        text = disassemble_eval_loop(host_path)
        if text is None:
            continue
        fp, head = prologue_sets_frame_pointer(text)
        return EvalLoopFacts(image_path, fp, head, frame_allocation(text))
    names = ", ".join(files) or "none"
    return EvalLoopFacts(note=f"{EVAL_FUNCTION} not found by objdump in the interpreter's mapped files ({names})")


def gather_facts(run, copy_out, perf_capability, target: ExternalTarget) -> TargetFacts:
    """Facts of a target: run(command) -> RunResult in the image (no perf capability); copy_out(paths) ->
    {image path: host path} of files copied out of it; perf_capability(perf command) -> capability, raising
    PerfNotPermitted."""
    from ..errors import PerfNotPermitted

    probe = run([target.python, "-c", PYTHON_PROBE])
    if probe.exit_code != 0:
        raise DriverError(f"{target.python} does not run in {target.image} (exit {probe.exit_code}): "
                          f"{(probe.stderr or probe.stdout).strip()[-1000:]}")
    python = json.loads(probe.stdout.strip().splitlines()[-1])
    perf = parse_perf_candidates(run(PERF_PROBE).stdout)
    facts = TargetFacts(python, perf)
    if perf.command:
        try:
            facts.capability = perf_capability(perf.command)
        except PerfNotPermitted as exc:
            facts.refusal = str(exc)
    files = copy_out(python.get("mapped") or [python.get("realpath")])
    facts.eval_loop = eval_loop_facts(files)
    return facts


# --------------------------------------------------------------------------
# Diagnosis


@dataclass(frozen=True)
class Reason:
    code: str
    text: str


@dataclass
class Evidence:
    """What a recording of the seed script in a mode gave."""

    activation: str = "xoption"
    error: str | None = None          # the perf command line failed (its stderr's tail)
    failure: str | None = None        # the chain assertion's message (conftest.assert_chain)
    process_samples: int = 0
    python_frames: int = 0            # py:: frames over all samples


def blockers(mode: str, facts: TargetFacts) -> list[Reason]:
    """Why nothing can be recorded at all in this image (no perf, perf not permitted)."""
    if not facts.perf.command:
        said = "; ".join(facts.perf.notes)
        return [Reason(NO_PERF, "no perf in the image (no working `perf` command; Debian: install linux-perf"
                                + (f"; {said})" if said else ")"))]
    if facts.refusal:
        return [Reason(NOT_PERMITTED, "perf not permitted: " + " ".join(facts.refusal.split()))]
    return []


def _trampoline_missing(facts: TargetFacts) -> str | None:
    """The evidence that the interpreter has no perf trampoline at all (None: it has one)."""
    py = facts.python
    xopt = py.get("xoption", {}).get("perf", {})
    have = py.get("config", {}).get("PY_HAVE_PERF_TRAMPOLINE")
    if py.get("sys_api") or xopt.get("python_entries"):
        return None
    wrote = "a map without py:: entries" if xopt.get("exists") else "no map"
    return (f"no trampoline in this interpreter: Python {facts.version_text} has no sys.activate_stack_trampoline, "
            f"-X perf is ignored (wrote {wrote} at /tmp/perf-PID.map), sysconfig PY_HAVE_PERF_TRAMPOLINE={have}; "
            f"the trampoline is native from {'.'.join(map(str, NATIVE_SINCE['perf']))}")


def _frame_pointer_evidence(facts: TargetFacts) -> tuple[bool, str]:
    """(no frame pointers, the evidence): the eval loop's prologue (decisive when known) and the CFLAGS."""
    config = facts.python.get("config", {})
    cflags = cflags_frame_pointers(config)
    loop = facts.eval_loop
    bits = []
    if loop.frame_pointer is not None:
        head = "; ".join(loop.prologue[:6])
        bits.append(f"{EVAL_FUNCTION}'s prologue in {loop.binary} "
                    + ("sets up %rbp/x29 as frame pointer" if loop.frame_pointer else "sets up no frame pointer")
                    + f" ({head} ...)")
    elif loop.note:
        bits.append(loop.note)
    if cflags is not None:
        bits.append(f"sysconfig's CFLAGS {'have' if cflags else 'lack'} {FRAME_POINTER_FLAG} "
                    f"({' '.join(optimisation_flags(config))})")
    # an eval loop that keeps a frame pointer of its own (gcc does, in 3.14's, for its own frame) in a build
    # whose CFLAGS lack the flag: the functions between the trampoline and it (_PyEval_Vector, the vectorcall
    # path) still have none, and the frame-pointer walk loses the trampoline's caller there
    if loop.frame_pointer and cflags is False:
        bits.append("the eval loop's own frame pointer does not make the rest of the build's")
    missing = loop.frame_pointer is False or cflags is False
    return missing, "; ".join(bits)


def diagnose(mode: str, facts: TargetFacts, evidence: Evidence) -> list[Reason]:
    """Why the mode did not work in this recording, from the facts; UNEXPLAINED where none explains it."""
    reasons = blockers(mode, facts)
    if reasons:
        return reasons
    if evidence.activation == "sys_api" and facts.offers_xoption(mode) and not facts.offers_sys_api(mode):
        said = facts.python.get("activation", {}).get(mode, "")
        known = (" (gh-141579, fixed upstream in 3.13.10; patches/3.13 carries the fix)"
                 if mode == "perf_jit" and facts.version[:2] == (3, 13) and facts.version < (3, 13, 10) else "")
        return [Reason(SYS_API_REFUSES, f"sys.activate_stack_trampoline({mode!r}) is refused ({said}) although "
                                        f"-X {mode} works{known}")]
    missing = _trampoline_missing(facts)
    activation = facts.python.get("activation", {}).get(mode, "")
    if mode == "perf_jit" and not facts.offers("perf_jit"):
        since = ".".join(map(str, NATIVE_SINCE["perf_jit"]))
        reasons.append(Reason(NO_BACKEND, f"backend not available in this version: perf_jit is native from {since}, "
                                          f"Python {facts.version_text} says: {activation}"))
    if missing:
        reasons.append(Reason(NO_TRAMPOLINE, missing))
    elif mode == "perf" and not facts.offers("perf"):
        reasons.append(Reason(NO_BACKEND, f"the perf backend is refused: {activation}"))
    if mode == "perf_jit" and facts.perf.version and facts.perf.version < PERF_JIT_MIN_PERF:
        need = ".".join(map(str, PERF_JIT_MIN_PERF))
        reasons.append(Reason(PERF_TOO_OLD, f"perf too old for perf inject --jit: {facts.perf.command} is "
                                            f"{'.'.join(map(str, facts.perf.version))}, perf_jit needs >= {need}"))
    if evidence.error and "addr2line" in evidence.error and "could not read first record" in evidence.error:
        version = ".".join(map(str, facts.perf.version or ())) or "?"
        reasons.append(Reason(NEEDS_ADDR2LINE, f"{facts.perf.command} ({version}) runs addr2line (binutils) to resolve "
                                               "dwarf call chains, the image has none, and perf script died of it "
                                               "(\"addr2line ...: could not read first record\"): install binutils"))
    if mode == "perf" and facts.offers("perf") and not missing:
        no_fp, why = _frame_pointer_evidence(facts)
        if no_fp:
            entries = facts.python.get("xoption", {}).get("perf", {}).get("python_entries", 0)
            alternative = ("use perf_jit" if facts.offers("perf_jit")
                           else f"rebuild with {FRAME_POINTER_FLAG} (this version has no perf_jit)")
            reasons.append(Reason(NO_FRAME_POINTERS,
                                  f"no frame pointers in this build, {alternative}: the trampoline works (-X perf "
                                  f"mapped {entries} py:: entries) but frame-pointer unwinding stops in the eval "
                                  f"loop ({evidence.python_frames} py:: frames in {evidence.process_samples} "
                                  f"samples); {why}"))
    if evidence.process_samples and any(r.code in (NO_TRAMPOLINE, NO_BACKEND) for r in reasons):
        reasons.append(Reason("recorded", f"recorded with -X {mode} ({evidence.activation}): {evidence.python_frames} "
                                          f"py:: frames in {evidence.process_samples} samples of the process"))
    if not reasons:
        said = error_summary(evidence.error) if evidence.error else (evidence.failure or "no reason found")
        reasons.append(Reason(UNEXPLAINED, f"unexplained ({evidence.activation}): {' '.join(said.split())[:600]}"))
    elif evidence.error and not any(r.code == NEEDS_ADDR2LINE for r in reasons):
        reasons.append(Reason(RECORDING_FAILED, f"the recording failed: {error_summary(evidence.error)}"))
    return reasons


def error_summary(text: str, lines: int = 2) -> str:
    """The last lines of a failed recording's output that say something (not perf's progress lines, not
    the traceback's carets)."""
    said = [l.strip() for l in text.splitlines()
            if l.strip() and not l.strip().startswith("[ perf record:") and not set(l.strip()) <= set("~^ ")]
    return " / ".join(said[-lines:])[-600:]


def render_reasons(reasons: list[Reason]) -> str:
    return "; ".join(r.text for r in reasons)


def check_skip_reason(target: ExternalTarget, required: set[str], facts: TargetFacts) -> str | None:
    """Why a check script needing `required` backends is not run with this target (None: it runs).
    Claimed modes are always checked; an unclaimed backend only where the interpreter offers it."""
    missing = [b for b in sorted(required) if not target.expects(b) and not facts.offers(b)]
    if not missing:
        return None
    said = "; ".join(f"{b}: {facts.python.get('activation', {}).get(b, 'unknown')}" for b in missing)
    return (f"{target.python} in {target.image} does not offer the {', '.join(missing)} backend(s) the check "
            f"needs ({said})")


# --------------------------------------------------------------------------
# Stock Debian images


def stock_image_tag(suite: str, package: str, perf_suite: str | None = None) -> str:
    perf = f"-perf-{perf_suite}" if perf_suite and perf_suite != suite else ""
    return f"{STOCK_IMAGE_REPOSITORY}:{suite}-{package}{perf}"


def stock_image_packages(package: str, perf_suite: str | None, suite: str) -> list[str]:
    perf = "linux-perf" if not perf_suite or perf_suite == suite else f"linux-perf/{perf_suite}"
    return [package, perf]


def ensure_stock_image(client, suite: str, package: str, perf_suite: str | None = None, rebuild: bool = False,
                       log=print) -> str:
    """A Debian `suite` image with `package` (e.g. python3.11) and linux-perf (from perf_suite of the same
    archive, e.g. bookworm-backports), bootstrapped like the project's bases (cpython_perf.image.bases.bootstrap_base:
    mmdebstrap from the machine's own archive entry, docker import)."""
    from ..image.bases import bootstrap_base
    from ..image.docker_build import image_exists

    tag = stock_image_tag(suite, package, perf_suite)
    if not rebuild and image_exists(client, tag):
        return tag
    extra = (perf_suite,) if perf_suite and perf_suite != suite else ()
    bootstrap_base(client, suite, stock_image_packages(package, perf_suite, suite), tag, log, extra_suites=extra)
    return tag


# --------------------------------------------------------------------------
# Command line


def results_junit(results: Path, image: str, python: str) -> Path:
    return Path(results) / f"external-{target_name(image, python)}" / "junit.xml"


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    p = sub.add_parser("conformance", allow_abbrev=False,
                       help="run the conformance suite against an image's interpreter (JUnit under "
                            "results/external-<name>/junit.xml); other arguments go to pytest")
    p.add_argument("--image", required=True)
    p.add_argument("--python", required=True)
    p.add_argument("--expect-modes", default=None)
    p.add_argument("--results", default=str(PROJECT_ROOT / "results"))
    pass_unknown_arguments(p)
    p = sub.add_parser("stock", allow_abbrev=False,
                       help="a stock interpreter of matrix.yaml's stock: (e.g. sid-3.15): its image bootstrapped, "
                            "then the conformance suite with its modes; other arguments go to pytest")
    p.add_argument("name")
    p.add_argument("--results", default=str(PROJECT_ROOT / "results"))
    pass_unknown_arguments(p)
    p = sub.add_parser("image", help="bootstrap a stock Debian image with a suite's interpreter and linux-perf")
    p.add_argument("--suite", required=True, help="Debian suite, e.g. bookworm")
    p.add_argument("--package", required=True, help="the interpreter's package, e.g. python3.11")
    p.add_argument("--perf-suite", default=None, help="suite of linux-perf (default: --suite), e.g. bookworm-backports")
    p.add_argument("--rebuild", action="store_true")


def _run_command(args) -> int:
    if args.action == "image":
        print(ensure_stock_image(host.docker_client(), args.suite, args.package, args.perf_suite, args.rebuild))
        return 0
    if args.action == "stock":
        from ..matrix import load_matrix

        matrix = load_matrix()
        target = matrix.stock.get(args.name)
        if target is None:
            raise DriverError(f"no stock interpreter {args.name!r}: matrix.yaml's stock: has "
                              f"{', '.join(matrix.stock) or 'none'}")
        image = ensure_stock_image(host.docker_client(), target.suite, target.package, target.perf_suite)
        print(f"stock {target.name}: {target.description}; {target.package} in {image}, must give "
              f"{', '.join(target.modes) or 'no mode'}; known defects: {', '.join(target.defects) or 'none'}",
              flush=True)
        junit = results_junit(Path(args.results), image, target.python)
        selection = ["--stock", target.name]
    else:
        try:
            parse_modes(args.expect_modes)
        except ValueError as exc:
            raise DriverError(str(exc)) from None
        junit = results_junit(Path(args.results), args.image, args.python)
        selection = ["--image", args.image, "--python", args.python,
                     *(["--expect-modes", args.expect_modes] if args.expect_modes else [])]
    junit.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pytest", str(PROJECT_ROOT / "conformance"), *selection,
               "-ra", f"--junitxml={junit}", *args.unknown]
    print("$ " + shlex.join(command), flush=True)
    return subprocess.run(command, cwd=PROJECT_ROOT).returncode


COMMAND = Command("external", "which perf mode works with any interpreter in any image, and why not: the "
                              "conformance suite against an image's interpreter, or a stock Debian image to "
                              "check (cpython_perf/check/external.py)",
                  add_arguments, _run_command, description=__doc__.splitlines()[0])


def main(argv=None) -> int:
    return main_of(COMMAND, argv, prog="python -m cpython_perf.check.external")


if __name__ == "__main__":
    sys.exit(main())
