"""The workloads profilers are compared on: each keeps one known function hot under a known Python chain.

  python3 profiler_workloads.py WORKLOAD TIMING_FILE [SCALE]

WORKLOAD is one of WORKLOADS; the time of its work (wall clock, time.perf_counter around it in this process,
interpreter start-up and a profiler's attach left out) is written to TIMING_FILE as JSON
{"workload": ..., "seconds": ...}.  SCALE multiplies the amount of work (1.0: about a second on a 2020s x86-64
core without a profiler).  The work is fixed, not timed, so a profiler that slows the program makes it take longer.

- seed: the howto's chain, foo -> bar -> baz, each a Python call, foo's loop in the eval loop;
- c_extensions: a Python function (checksum_block) whose time is spent in C: json.dumps, zlib.compress and
  hashlib.sha256 of each block;
- asyncio_service: an asyncio server on a loopback socket, and clients in the same loop; each request is handled
  by serve_client -> handle_request -> render (coroutines awaiting, render the hot one), and the sockets put
  time into the kernel;
- process_pool: multiprocessing.Pool(2) mapping work_item -> crunch over items, in worker processes started
  the interpreter's default way (fork before 3.14, forkserver from 3.14 on Linux).

The bench that uses them (cpython_perf.bench.profilers) names the hot function and its chain of each, from
the innermost frame out, in WORKLOADS.
"""
import asyncio
import hashlib
import json
import multiprocessing
import sys
import time
import zlib

# workload: (hot function, its chain from the innermost frame out: frames of this file only)
WORKLOADS = {
    "seed": ("foo", ["foo", "bar", "baz", "seed", "main", "<module>"]),
    "c_extensions": ("checksum_block", ["checksum_block", "encode_batch", "c_extensions", "main", "<module>"]),
    "asyncio_service": ("render", ["render", "handle_request", "serve_client"]),
    "process_pool": ("crunch", ["crunch", "work_item"]),
}


# -- seed


def foo(n):
    f = 0
    for i in range(n):
        f += i * i
    return f


def bar(n):
    return foo(n)


def baz(n):
    return bar(n)


def seed(scale):
    for _ in range(int(40 * scale)):
        baz(200_000)


# -- c_extensions


def checksum_block(record):
    text = json.dumps(record, sort_keys=True).encode()
    packed = zlib.compress(text * 8, 6)
    return hashlib.sha256(packed).hexdigest()


def encode_batch(records):
    # a loop, not a comprehension: before 3.12 a comprehension is a frame of its own between the two
    digests = []
    for record in records:
        digests.append(checksum_block(record))
    return digests


def c_extensions(scale):
    records = [{"id": i, "name": f"item-{i}", "tags": [f"t{j}" for j in range(20)], "value": i * 0.5}
               for i in range(200)]
    for _ in range(int(120 * scale)):
        encode_batch(records)


# -- asyncio_service


def render(request):
    total = 0
    for i in range(3000):
        total += (i * len(request)) % 7
    return b"%d\n" % total


async def handle_request(request):
    await asyncio.sleep(0)
    return render(request)


async def serve_client(reader, writer):
    while True:
        line = await reader.readline()
        if not line:
            break
        writer.write(await handle_request(line))
        await writer.drain()
    writer.close()


async def client(port, requests):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for i in range(requests):
        writer.write(b"request %d\n" % i)
        await writer.drain()
        await reader.readline()
    writer.close()
    await writer.wait_closed()


async def service(scale):
    server = await asyncio.start_server(serve_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        await asyncio.gather(*(client(port, int(250 * scale)) for _ in range(8)))


def asyncio_service(scale):
    asyncio.run(service(scale))


# -- process_pool


def crunch(n):
    s = 0
    for i in range(n):
        s += i % 13
    return s


def work_item(n):
    return crunch(n)


def process_pool(scale):
    pool = multiprocessing.Pool(2)
    try:
        pool.map(work_item, [400_000] * int(48 * scale), chunksize=1)
    finally:
        pool.close()   # workers exit on their own (not terminate()d): a profiler following them keeps their samples
        pool.join()


def main():
    workload, timing_file = sys.argv[1], sys.argv[2]
    scale = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    if workload not in WORKLOADS:
        sys.exit(f"unknown workload {workload!r} (known: {', '.join(WORKLOADS)})")
    run = globals()[workload]
    started = time.perf_counter()
    run(scale)
    seconds = time.perf_counter() - started
    with open(timing_file, "w") as fh:
        json.dump({"workload": workload, "seconds": seconds}, fh)


if __name__ == "__main__":
    main()
