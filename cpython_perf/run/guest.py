"""Real perf for a foreign-arch cell: boot its own image in a qemu-system guest.

Under qemu-user perf samples the emulator, never the emulated program, so a
foreign arch's perf runs happen in a full-system guest instead (what the guest
is -- emulator, machine, CPU, console, kernel package -- is the arch's
`guest:` in matrix.yaml's arch_facts):

1. the cell image (Debian of the arch with its kernel, perf and the
   cross-compiled CPython) is exported and written to an ext4 disk image;
2. qemu-system-<arch> (TCG) boots its kernel and initramfs with
   init=/cpython-perf/init.sh, which mounts /proc, /sys, a fresh /tmp, lowers
   perf_event_paranoid and runs every job: the same perf_runs shell scripts
   the containers run, each with the conformance scripts in a clean /src;
3. the outputs each job names are tarred onto a second raw disk, which the
   host untars after the guest powers itself off.

One boot runs a whole batch (a cell's seed chain runs), since booting costs
about a minute.  Boot time and per-job wall time are returned for the notes.
"""

from __future__ import annotations

import os
import re
import selectors
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import host, progress
from ..errors import DriverError, RuntimeFailure
from ..matrix import Cell

GUEST_DIR = "cpython-perf"          # /cpython-perf in the guest's root
UP_MARKER = "CPYTHON-PERF-GUEST-UP"
DONE_MARKER = "CPYTHON-PERF-GUEST-DONE"
OUTPUT_DISK_BYTES = 1 << 30         # sparse; the outputs' tar is written raw onto it
GUEST_MEMORY_MB = 2048
DEFAULT_TIMEOUT = 3600

INIT_SCRIPT = r"""#!/bin/sh
# init of the cpython-perf guest: run the jobs, write their outputs to /dev/vdb, power off.
export PATH=/opt/cpython/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /run
echo -1 > /proc/sys/kernel/perf_event_paranoid
# sample at the rate asked for: emulated interrupts are slow, and the kernel
# would otherwise keep lowering the maximum rate (perf_cpu_time_max_percent)
echo 0 > /proc/sys/kernel/perf_cpu_time_max_percent
echo 100000 > /proc/sys/kernel/perf_event_max_sample_rate
echo "UP_MARKER $(cut -d' ' -f1 /proc/uptime)"
out=/run/out
mkdir -p $out
uname -a > $out/uname.txt
for job in /GUEST_DIR/jobs/*; do
    name=${job##*/}
    mkdir -p $out/$name
    umount /tmp 2>/dev/null; mount -t tmpfs -o mode=1777 tmpfs /tmp
    rm -rf /src && mkdir -p /src && cp /GUEST_DIR/files/* /src/ && chmod 1777 /src
    t0=$(cut -d' ' -f1 /proc/uptime)
    (cd /src && sh $job/run.sh) > $out/$name/stdout 2> $out/$name/stderr
    echo $? > $out/$name/exit_code
    echo "$t0 $(cut -d' ' -f1 /proc/uptime)" > $out/$name/uptime
    for f in $(cat $job/outputs); do [ -f /src/$f ] && cp /src/$f $out/$name/; done
    echo "job $name exit $(cat $out/$name/exit_code)"
done
tar -C $out -cf /dev/vdb .
sync
echo "DONE_MARKER $(cut -d' ' -f1 /proc/uptime)"
echo o > /proc/sysrq-trigger
sleep 60
""".replace("UP_MARKER", UP_MARKER).replace("DONE_MARKER", DONE_MARKER).replace("GUEST_DIR", GUEST_DIR)


@dataclass
class GuestJob:
    """One shell script to run in /src of the guest, and the files of /src to bring back."""

    name: str
    shell: str
    outputs: tuple[str, ...]


@dataclass
class JobResult:
    name: str
    exit_code: int
    stdout: str
    stderr: str
    seconds: float
    files: dict[str, bytes] = field(default_factory=dict)


@dataclass
class GuestRun:
    """What one boot did: per-job results, the boot and total times, the console."""

    jobs: dict[str, JobResult]
    boot_seconds: float
    total_seconds: float
    disk_seconds: float
    console: str
    uname: str = ""


def qemu_command(cell: Cell, kernel: Path, initrd: Path, disk: Path, output: Path,
                 smp: int | None = None) -> list[str]:
    """The qemu-system command line that boots disk with init=/cpython-perf/init.sh."""
    guest = cell.arch_facts.required_guest()
    smp = smp or max(1, min(4, os.cpu_count() or 1))
    return [
        guest.qemu, "-M", guest.machine, "-cpu", guest.cpu, "-smp", str(smp), "-m", str(GUEST_MEMORY_MB),
        "-nographic", "-no-reboot",
        "-kernel", str(kernel), "-initrd", str(initrd),
        "-append", f"root=/dev/vda rw console={guest.console} panic=-1 init=/{GUEST_DIR}/init.sh",
        "-drive", f"file={disk},format=raw,if=virtio",
        "-drive", f"file={output},format=raw,if=virtio",
    ]


def boot_files(rootfs: Path, kernel_file: str = "vmlinuz") -> tuple[Path, Path]:
    """The newest kernel (/boot/<kernel_file>-<version>) and its initramfs under rootfs/boot."""
    boot = rootfs / "boot"
    kernels = sorted(boot.glob(f"{kernel_file}-*"))
    if not kernels:
        raise DriverError(f"the image has no kernel in /boot ({kernel_file}-*): the arch's base image must "
                          "include its guest's kernel package (guest.kernel in matrix.yaml's arch_facts)")
    kernel = kernels[-1]
    initrd = boot / ("initrd.img-" + kernel.name[len(kernel_file) + 1:])
    if not initrd.is_file():
        raise DriverError(f"{kernel} has no initramfs {initrd.name}: initramfs-tools must be in the base image")
    return kernel, initrd


def parse_console_times(console: str) -> tuple[float | None, float | None]:
    """Guest uptimes (s) the init script printed when it started and when it finished."""
    up = re.search(rf"{UP_MARKER} ([\d.]+)", console)
    done = re.search(rf"{DONE_MARKER} ([\d.]+)", console)
    return (float(up.group(1)) if up else None, float(done.group(1)) if done else None)


def export_rootfs(client, image: str, dest: Path) -> None:
    """Unpack image's file system into dest (as root: ownership and modes are kept)."""
    container = client.containers.create(image, ["true"])
    try:
        tar = subprocess.Popen(["tar", "-x", "-p", "--numeric-owner", "-f", "-", "-C", str(dest)],
                               stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            for chunk in container.export(chunk_size=1 << 20):
                tar.stdin.write(chunk)
        finally:
            tar.stdin.close()
            err = tar.stderr.read().decode(errors="replace")
            tar.wait()
        if tar.returncode != 0:
            raise DriverError(f"unpacking {image} failed: {err.strip()[-1000:]}")
    finally:
        container.remove(force=True)


def _install_jobs(rootfs: Path, jobs: list[GuestJob], files: list[Path]) -> None:
    guest = rootfs / GUEST_DIR
    if guest.exists():
        shutil.rmtree(guest)
    (guest / "files").mkdir(parents=True)
    for f in files:
        shutil.copy2(f, guest / "files" / f.name)
    for index, job in enumerate(jobs):
        d = guest / "jobs" / f"{index:03d}-{job.name}"
        d.mkdir(parents=True)
        (d / "run.sh").write_text(job.shell)
        (d / "outputs").write_text("\n".join(job.outputs) + "\n")
    init = guest / "init.sh"
    init.write_text(INIT_SCRIPT)
    init.chmod(0o755)


def _make_disk(rootfs: Path, disk: Path) -> None:
    used = int(subprocess.run(["du", "-sb", str(rootfs)], capture_output=True, text=True, check=True).stdout.split()[0])
    size = used + used // 2 + (1 << 30)
    with open(disk, "wb") as f:
        f.truncate(size)
    proc = subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "cpython-perf", "-d", str(rootfs), str(disk)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise DriverError(f"mkfs.ext4 -d {rootfs} failed: {proc.stderr.strip()[-2000:]}")


def run_in_guest(client, cell: Cell, jobs: list[GuestJob], files: list[Path], *, timeout: float = DEFAULT_TIMEOUT,
                 workdir: Path | None = None, log=print) -> GuestRun:
    """Boot cell's image in a qemu-system guest, run jobs there, return their results."""
    guest = cell.arch_facts.required_guest()
    host.ensure_commands({guest.qemu: guest.package, "mkfs.ext4": "e2fsprogs"}, log)
    if not jobs:
        raise ValueError("no jobs to run in the guest")
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ValueError(f"job names must be unique: {names}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"cpython-perf-guest-{cell.name}-", dir=workdir) as tmp:
        tmp = Path(tmp)
        rootfs = tmp / "rootfs"
        rootfs.mkdir()
        export_rootfs(client, cell.image, rootfs)
        _install_jobs(rootfs, jobs, files)
        kernel, initrd = boot_files(rootfs, guest.kernel_file)
        shutil.copy2(kernel, tmp / "vmlinuz")
        shutil.copy2(initrd, tmp / "initrd.img")
        disk, output = tmp / "root.img", tmp / "output.img"
        _make_disk(rootfs, disk)
        shutil.rmtree(rootfs)
        with open(output, "wb") as f:
            f.truncate(OUTPUT_DISK_BYTES)
        disk_seconds = time.monotonic() - started
        cmd = qemu_command(cell, tmp / "vmlinuz", tmp / "initrd.img", disk, output)
        log(f"booting {cell.image} in {cell.arch_facts.qemu_system} ({len(jobs)} jobs): {shlex.join(cmd)}")
        boot_started = time.monotonic()
        console, boot_seconds = _run_qemu(cmd, timeout, log, f"guest-{cell.name}")
        total = time.monotonic() - boot_started
        up, done = parse_console_times(console)
        if done is None:
            raise RuntimeFailure(f"the {cell.name} guest did not finish its jobs (no {DONE_MARKER} on its console "
                              f"within {timeout:.0f} s; whole console: {progress.log_path(f'guest-{cell.name}')}); "
                              f"console tail:\n{console[-4000:]}")
        results = _read_outputs(output, jobs)
    return GuestRun(results["jobs"], boot_seconds if boot_seconds is not None else (up or 0.0), total,
                    disk_seconds, console, results["uname"])


def _run_qemu(cmd: list[str], timeout: float, log=print, name: str = "guest") -> tuple[str, float | None]:
    """Run qemu to its power-off; the console text and the seconds until init started.
    The init script's own lines (start, each job's exit, done) are logged as they come; the whole console goes to
    results/logs/<name>.log, with a heartbeat between those lines (cpython_perf.progress; --verbose: every line)."""
    with progress.Progress(f"qemu-system guest {name}", progress.log_path(name), log) as step:
        console, boot_seconds = _qemu_console(cmd, timeout, log, step)
        step.ok = DONE_MARKER in console
    return console, boot_seconds


def _qemu_console(cmd: list[str], timeout: float, log, step) -> tuple[str, float | None]:
    started = time.monotonic()
    lines: list[str] = []
    boot_seconds = None
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        buffer = b""
        while True:
            remaining = timeout - (time.monotonic() - started)
            if remaining <= 0:
                proc.kill()
                lines.append(f"[cpython-perf: killed after {timeout:.0f} s]")
                break
            if not sel.select(timeout=min(remaining, 5)):
                if proc.poll() is not None:
                    break
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for raw in complete:
                line = raw.decode(errors="replace").rstrip("\r")
                lines.append(line)
                step.line(line)
                if boot_seconds is None and UP_MARKER in line:
                    boot_seconds = time.monotonic() - started
                if line.startswith((UP_MARKER, DONE_MARKER, "job ")) and not step.verbose:
                    log(f"guest [{time.monotonic() - started:6.0f} s] {line}")
        if buffer:
            lines.append(buffer.decode(errors="replace"))
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return "\n".join(lines), boot_seconds


def _read_outputs(output: Path, jobs: list[GuestJob]) -> dict:
    results: dict[str, JobResult] = {}
    by_dir = {f"{i:03d}-{j.name}": j.name for i, j in enumerate(jobs)}
    files: dict[str, dict[str, bytes]] = {}
    uname = ""
    try:
        with tarfile.open(output, mode="r:") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                parts = Path(member.name).parts
                data = tar.extractfile(member).read()
                if parts[-1] == "uname.txt" and len(parts) <= 2:
                    uname = data.decode(errors="replace").strip()
                    continue
                if len(parts) < 2:
                    continue
                files.setdefault(parts[-2], {})[parts[-1]] = data
    except tarfile.TarError as exc:
        raise DriverError(f"the guest's output disk holds no readable tar: {exc}") from None
    for directory, name in by_dir.items():
        got = files.get(directory)
        if got is None or "exit_code" not in got:
            results[name] = JobResult(name, -1, "", "the guest wrote no result for this job", 0.0)
            continue
        t0, t1 = (float(x) for x in got.pop("uptime", b"0 0").split())
        results[name] = JobResult(
            name, int(got.pop("exit_code").strip() or -1),
            got.pop("stdout", b"").decode(errors="replace"), got.pop("stderr", b"").decode(errors="replace"),
            t1 - t0, got,
        )
    return {"jobs": results, "uname": uname}
