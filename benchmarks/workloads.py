#!/usr/bin/env python3
"""Pure-Python workloads that measure the runtime cost of the perf trampolines.

Stdlib only; runs unchanged on CPython 3.9 and later.  Each workload runs a
fixed-size kernel `loops` times and checks the kernel's result against a known
value, so that a broken interpreter fails loudly instead of timing garbage.

  python3 workloads.py --list
  python3 workloads.py --run nbody,calls --repeat 3 [--scale 0.05]

--run times each named workload --repeat times after one warm-up run (with
time.perf_counter) and prints one JSON line:
{"python": "3.11.2", "perf_active": false, "results": {"nbody": [0.31, ...], ...}}
(perf_active is null where sys.is_stack_trampoline_active does not exist).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

WORKLOADS = {}  # name -> (function of loops, loops at scale 1)


def workload(name, loops):
    """Register a function of `loops` as the workload `name`, sized for ~0.3 s on CPython 3.11."""

    def register(fn):
        WORKLOADS[name] = (fn, loops)
        return fn

    return register


def check(name, ok, got):
    if not ok:
        raise SystemExit(f"workload {name}: wrong result {got!r}")


def close(got, want, tolerance=1e-9):
    return abs(got - want) <= tolerance * max(1.0, abs(want))


# --------------------------------------------------------------------------
# nbody: float arithmetic


def _system():
    """A heavy centre and four light orbiters: [x, y, z, vx, vy, vz, mass] each."""
    bodies = [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 40.0]]
    for i in range(1, 5):
        radius = 1.5 * i
        speed = math.sqrt(40.0 / radius)
        bodies.append([radius, 0.0, 0.02 * i, 0.0, speed, 0.01 * i, 0.003 * i])
    # the centre carries the opposite momentum, so the system stays put
    for axis in (3, 4, 5):
        bodies[0][axis] = -sum(b[axis] * b[6] for b in bodies[1:]) / bodies[0][6]
    return bodies


def _energy(bodies):
    energy = 0.0
    for i, (x, y, z, vx, vy, vz, m) in enumerate(bodies):
        energy += 0.5 * m * (vx * vx + vy * vy + vz * vz)
        for x2, y2, z2, _, _, _, m2 in bodies[i + 1:]:
            dx, dy, dz = x - x2, y - y2, z - z2
            energy -= m * m2 / math.sqrt(dx * dx + dy * dy + dz * dz)
    return energy


def _advance(bodies, dt, steps):
    pairs = [(b1, b2) for i, b1 in enumerate(bodies) for b2 in bodies[i + 1:]]
    for _ in range(steps):
        for b1, b2 in pairs:
            dx = b1[0] - b2[0]
            dy = b1[1] - b2[1]
            dz = b1[2] - b2[2]
            d2 = dx * dx + dy * dy + dz * dz
            mag = dt / (d2 * math.sqrt(d2))
            m1 = b1[6] * mag
            m2 = b2[6] * mag
            b1[3] -= dx * m2
            b1[4] -= dy * m2
            b1[5] -= dz * m2
            b2[3] += dx * m1
            b2[4] += dy * m1
            b2[5] += dz * m1
        for b in bodies:
            b[0] += dt * b[3]
            b[1] += dt * b[4]
            b[2] += dt * b[5]


NBODY_ENERGY = (-0.16000420521626746, -0.16000372023858922)


@workload("nbody", loops=80)
def nbody(loops):
    """n-body simulation: 1000 steps of five bodies (float arithmetic on lists)."""
    for _ in range(loops):
        bodies = _system()
        before = _energy(bodies)
        _advance(bodies, 0.001, 1000)
        after = _energy(bodies)
        check("nbody", close(before, NBODY_ENERGY[0]) and close(after, NBODY_ENERGY[1]), (before, after))


# --------------------------------------------------------------------------
# richards: a task scheduler (method calls, object attributes)

I_IDLE, I_WORK, I_HANDLER_A, I_HANDLER_B, I_DEVICE_A, I_DEVICE_B = range(6)
K_DEVICE, K_WORK = 0, 1


class Packet:
    """A message passed between tasks; work packets carry four data items."""

    def __init__(self, link, ident, kind):
        self.link = link
        self.ident = ident
        self.kind = kind
        self.datum = 0
        self.data = [0, 0, 0, 0]

    def append_to(self, queue):
        self.link = None
        if queue is None:
            return self
        last = queue
        while last.link is not None:
            last = last.link
        last.link = self
        return queue


class Scheduler:
    """Runs the highest-priority task that is neither held nor waiting without a packet."""

    def __init__(self):
        self.tasks = [None] * 6
        self.head = None
        self.current = None
        self.queue_count = 0
        self.hold_count = 0

    def add(self, task):
        task.link = self.head
        self.head = task
        self.tasks[task.ident] = task

    def run(self):
        task = self.head
        while task is not None:
            if task.holding or (task.waiting and not task.pending):
                task = task.link
            else:
                self.current = task
                task = task.step()


class Task:
    def __init__(self, scheduler, ident, priority, queue, waiting):
        self.scheduler = scheduler
        self.ident = ident
        self.priority = priority
        self.queue = queue
        self.pending = queue is not None
        self.waiting = waiting
        self.holding = False
        self.link = None
        scheduler.add(self)

    def step(self):
        packet = None
        if self.waiting and self.pending:
            packet = self.queue
            self.queue = packet.link
            self.pending = self.queue is not None
            self.waiting = False
        return self.fn(packet)

    def wait(self):
        self.waiting = True
        return self

    def hold_self(self):
        self.scheduler.hold_count += 1
        self.holding = True
        return self.link

    def release(self, ident):
        task = self.scheduler.tasks[ident]
        task.holding = False
        return task if task.priority > self.priority else self

    def send(self, packet):
        target = self.scheduler.tasks[packet.ident]
        self.scheduler.queue_count += 1
        packet.link = None
        packet.ident = self.ident
        return target.receive(packet, self)

    def receive(self, packet, sender):
        if self.queue is None:
            self.queue = packet
            self.pending = True
            if self.priority > sender.priority:
                return self
        else:
            self.queue = packet.append_to(self.queue)
        return sender


class IdleTask(Task):
    def __init__(self, scheduler, count):
        Task.__init__(self, scheduler, I_IDLE, 1, None, False)
        self.count = count
        self.control = 1

    def fn(self, packet):
        self.count -= 1
        if self.count == 0:
            return self.hold_self()
        if self.control & 1 == 0:
            self.control //= 2
            return self.release(I_DEVICE_A)
        self.control = (self.control // 2) ^ 0xD008
        return self.release(I_DEVICE_B)


class WorkTask(Task):
    def __init__(self, scheduler, queue):
        Task.__init__(self, scheduler, I_WORK, 1000, queue, True)
        self.destination = I_HANDLER_A
        self.count = 0

    def fn(self, packet):
        if packet is None:
            return self.wait()
        self.destination = I_HANDLER_B if self.destination == I_HANDLER_A else I_HANDLER_A
        packet.ident = self.destination
        packet.datum = 0
        for i in range(4):
            self.count = self.count % 26 + 1
            packet.data[i] = self.count
        return self.send(packet)


class HandlerTask(Task):
    def __init__(self, scheduler, ident, priority, queue):
        Task.__init__(self, scheduler, ident, priority, queue, True)
        self.work_in = None
        self.device_in = None

    def fn(self, packet):
        if packet is not None:
            if packet.kind == K_WORK:
                self.work_in = packet.append_to(self.work_in)
            else:
                self.device_in = packet.append_to(self.device_in)
        work = self.work_in
        if work is not None:
            count = work.datum
            if count >= 4:
                self.work_in = work.link
                return self.send(work)
            device = self.device_in
            if device is not None:
                self.device_in = device.link
                device.datum = work.data[count]
                work.datum = count + 1
                return self.send(device)
        return self.wait()


class DeviceTask(Task):
    def __init__(self, scheduler, ident, priority):
        Task.__init__(self, scheduler, ident, priority, None, True)
        self.held = None

    def fn(self, packet):
        if packet is None:
            if self.held is None:
                return self.wait()
            packet, self.held = self.held, None
            return self.send(packet)
        self.held = packet
        return self.hold_self()


def _schedule(count):
    scheduler = Scheduler()
    IdleTask(scheduler, count)
    WorkTask(scheduler, Packet(Packet(None, I_IDLE, K_WORK), I_IDLE, K_WORK))
    for ident, priority, device in ((I_HANDLER_A, 2000, I_DEVICE_A), (I_HANDLER_B, 3000, I_DEVICE_B)):
        queue = None
        for _ in range(3):
            queue = Packet(queue, device, K_DEVICE)
        HandlerTask(scheduler, ident, priority, queue)
    DeviceTask(scheduler, I_DEVICE_A, 4000)
    DeviceTask(scheduler, I_DEVICE_B, 5000)
    scheduler.run()
    return scheduler.queue_count, scheduler.hold_count


@workload("richards", loops=120)
def richards(loops):
    """Richards-like scheduler: six tasks passing packets, idle count 1000 (method calls, attributes)."""
    for _ in range(loops):
        counts = _schedule(1000)
        check("richards", counts == (2322, 928), counts)


# --------------------------------------------------------------------------
# fannkuch: permutations and list slicing


def _fannkuch(n):
    perm1 = list(range(n))
    count = [0] * n
    checksum = max_flips = permutations = 0
    r = n
    while True:
        while r != 1:
            count[r - 1] = r
            r -= 1
        perm = perm1[:]
        flips = 0
        first = perm[0]
        while first:
            perm[:first + 1] = perm[first::-1]
            flips += 1
            first = perm[0]
        if flips > max_flips:
            max_flips = flips
        checksum += -flips if permutations & 1 else flips
        while True:
            if r == n:
                return checksum, max_flips
            head = perm1[0]
            perm1[:r] = perm1[1:r + 1]
            perm1[r] = head
            count[r] -= 1
            if count[r] > 0:
                break
            r += 1
        permutations += 1


@workload("fannkuch", loops=70)
def fannkuch(loops):
    """Fannkuch-redux kernel of size 7: every permutation, prefix reversals by slicing."""
    for _ in range(loops):
        result = _fannkuch(7)
        check("fannkuch", result == (228, 16), result)


# --------------------------------------------------------------------------
# points: floats in objects and lists


class Vec:
    def __init__(self, x, y, z):
        self.x = x
        self.y = y
        self.z = z

    def dot(self, other):
        return self.x * other.x + self.y * other.y + self.z * other.z

    def scaled(self, factor):
        return Vec(self.x * factor, self.y * factor, self.z * factor)

    def max_with(self, other):
        return Vec(max(self.x, other.x), max(self.y, other.y), max(self.z, other.z))


def _points(n):
    points = [Vec(math.sin(i * 0.37), math.cos(i * 0.21) * 2.0, (i % 11) * 0.5 + 1.0) for i in range(n)]
    unit = [p.scaled(1.0 / math.sqrt(p.dot(p))) for p in points]
    top = unit[0]
    for p in unit[1:]:
        top = top.max_with(p)
    return top.x, top.y, top.z, sum(p.x + p.y + p.z for p in unit)


POINTS_RESULT = (0.7071021107716958, 0.8944271909999159, 0.9999533012497963, 4329.223664298246)


@workload("points", loops=55)
def points(loops):
    """Create 5000 3-d points, normalize them, take the component-wise max (floats, lists, objects)."""
    for _ in range(loops):
        result = _points(5000)
        check("points", all(close(g, w) for g, w in zip(result, POINTS_RESULT)), result)


# --------------------------------------------------------------------------
# calls: many small Python function and method calls


def _fib(n):
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


def _inc(x):
    return x + 1


class Counter:
    def __init__(self):
        self.n = 0

    def bump(self, by=1):
        self.n += by
        return self.n


def _calls():
    total = 0
    for _ in range(100000):
        total = _inc(total)
    counter = Counter()
    for _ in range(25000):
        counter.bump()
        counter.bump(by=2)
    return _fib(25), total, counter.n


@workload("calls", loops=14)
def calls(loops):
    """Call-heavy: fib(25) recursively, 100000 calls of a tiny function, 50000 method calls."""
    for _ in range(loops):
        result = _calls()
        check("calls", result == (75025, 100000, 75000), result)


# --------------------------------------------------------------------------
# generators: a pipeline of generators


def _numbers(n):
    i = 0
    while i < n:
        yield i
        i += 1


def _squares(source):
    for x in source:
        yield x * x


def _odd(source):
    for x in source:
        if x & 1:
            yield x


def _pairs(source):
    previous = 0
    for x in source:
        yield previous + x
        previous = x


def _chained(n):
    yield from _pairs(_odd(_squares(_numbers(n))))
    yield from (x % 7 for x in _numbers(n))


def _generators(n):
    return sum(_chained(n))


@workload("generators", loops=80)
def generators(loops):
    """Generator pipeline: numbers -> squares -> odd -> pairs, yield from and a generator expression."""
    for _ in range(loops):
        result = _generators(20000)
        check("generators", result == 2666266759996, result)


# --------------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--list", action="store_true", help="print the workload names, one a line")
    what.add_argument("--run", metavar="NAME[,NAME...]", help="run these workloads and print one JSON line")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each workload (after one warm-up)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every workload's size (quick tests)")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(WORKLOADS))
        return 0
    names = [n for n in args.run.split(",") if n]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown or not names:
        parser.error(f"unknown workload(s) {', '.join(unknown) or '(none given)'}; known: {', '.join(WORKLOADS)}")
    if args.repeat < 1 or args.scale <= 0:
        parser.error("--repeat must be at least 1 and --scale positive")
    results = {}
    for name in names:
        fn, loops = WORKLOADS[name]
        loops = max(1, round(loops * args.scale))
        fn(loops)
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            fn(loops)
            times.append(time.perf_counter() - started)
        results[name] = times
    active = getattr(sys, "is_stack_trampoline_active", None)
    print(json.dumps({"python": sys.version.split()[0], "perf_active": active() if active else None,
                      "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
