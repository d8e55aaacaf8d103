"""What a CI run that rebuilds every image stores, measured on the images of this machine and extrapolated to
the plan's image count:

  save   every image as its own `docker save | zstd -T0 -6` file (an Actions-cache entry per image): each
         file carries the base layers again;
  layers the distinct layers of a registry (what GHCR keeps): each image pushed, the sizes of its manifest's
         (gzip-compressed) layers summed once per layer digest.

`python -m cpython_perf ci-budget --registry 127.0.0.1:5000/budget [--image REF ...] [--json FILE]` pushes to
a registry the daemon reaches over plain HTTP on loopback (Debian's docker-registry; docs/ci.md), reads the
manifests from it with the registry API, removes the tags it made and prints the table.  It compresses
gigabytes: minutes of CPU.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import urllib.request

from .. import host
from ..errors import DriverError
from ..matrix import Matrix, load_matrix
from ..image.registry import check_registry
from ..subcommands import Command, main_of
from . import plan as ci_plan

KINDS = {"cpython-perf": "cell", "cpython-perf-tools": "tools", "cpython-perf-base": "base"}
MANIFEST_TYPES = ("application/vnd.docker.distribution.manifest.v2+json, "
                  "application/vnd.oci.image.manifest.v1+json")


def local_images(client) -> list[str]:
    """The cell, tools and base images of this machine, by tag."""
    refs = []
    for repository in KINDS:
        for image in client.images.list(name=repository):
            refs += [t for t in image.tags if t.split(":", 1)[0] == repository]
    return sorted(set(refs))


def saved_size(ref: str) -> int:
    """Bytes of `docker save REF | zstd -T0 -6`."""
    save = subprocess.Popen(["docker", "save", ref], stdout=subprocess.PIPE)
    zstd = subprocess.Popen(["zstd", "-T0", "-6", "-q", "-c"], stdin=save.stdout, stdout=subprocess.PIPE)
    save.stdout.close()
    size = 0
    while chunk := zstd.stdout.read(1 << 20):
        size += len(chunk)
    if zstd.wait() != 0 or save.wait() != 0:
        raise DriverError(f"docker save {ref} | zstd failed")
    return size


def pushed_layers(client, ref: str, registry: str) -> dict[str, int]:
    """Push ref to registry (under its own repository and tag); its manifest's layers, digest -> bytes."""
    repository, tag = ref.split(":", 1)
    target = f"{registry}/{repository}"
    client.images.get(ref).tag(target, tag)
    try:
        for chunk in client.images.push(target, tag=tag, stream=True, decode=True):
            if "error" in chunk:
                raise DriverError(f"pushing {target}:{tag}: {chunk['error']}")
    finally:
        client.images.remove(f"{target}:{tag}", noprune=True)
    host_port, _, path = f"{registry}/{repository}".partition("/")
    request = urllib.request.Request(f"http://{host_port}/v2/{path}/manifests/{tag}",
                                     headers={"Accept": MANIFEST_TYPES})
    with urllib.request.urlopen(request, timeout=60) as answer:
        manifest = json.load(answer)
    return {layer["digest"]: layer["size"] for layer in manifest["layers"]}


def summarize(measured: dict[str, dict], plan_counts: dict[str, int]) -> dict:
    """Totals over the measured images, and extrapolated to plan_counts (images of each kind in a full run):
    an image of a kind not measured counts as the mean of those measured of its kind."""
    by_kind: dict[str, list[dict]] = {}
    for ref, entry in measured.items():
        by_kind.setdefault(entry["kind"], []).append(entry)
    base_layers = {d for e in by_kind.get("base", []) for d in e["layers"]}

    def own(entry):   # the layers an image adds to the bases measured
        return sum(size for digest, size in entry["layers"].items() if digest not in base_layers)

    distinct: dict[str, int] = {}
    for entry in measured.values():
        distinct.update(entry["layers"])
    out = {"measured": {"images": len(measured), "save_bytes": sum(e["save"] for e in measured.values()),
                        "layer_bytes": sum(distinct.values())},
           "per_kind": {}, "plan_counts": plan_counts, "extrapolated": {"save_bytes": 0, "layer_bytes": 0}}
    for kind, count in plan_counts.items():
        entries = by_kind.get(kind, [])
        if not entries:
            raise DriverError(f"no {kind} image measured: the extrapolation needs one (pass --image)")
        save = statistics.mean(e["save"] for e in entries)
        layers = statistics.mean(sum(e["layers"].values()) if kind == "base" else own(e) for e in entries)
        out["per_kind"][kind] = {"measured": len(entries), "mean_save_bytes": round(save),
                                 "mean_own_layer_bytes": round(layers)}
        out["extrapolated"]["save_bytes"] += round(save * count)
        out["extrapolated"]["layer_bytes"] += round(layers * count)
    return out


def plan_counts(matrix: Matrix, aarch64: str = "native") -> dict[str, int]:
    counts: dict[str, int] = {}
    for job in ci_plan.build_plan(matrix, "schedule", aarch64=aarch64)["images"]:
        counts[job["kind"]] = counts.get(job["kind"], 0) + 1
    return counts


def table(summary: dict) -> str:
    gb = 1e9
    lines = ["| | images | docker save, zstd -6 per image | distinct registry layers |", "| --- | --- | --- | --- |"]
    m, e = summary["measured"], summary["extrapolated"]
    lines.append(f"| measured here | {m['images']} | {m['save_bytes'] / gb:.2f} GB | {m['layer_bytes'] / gb:.2f} GB |")
    counts = ", ".join(f"{n} {k}" for k, n in summary["plan_counts"].items())
    lines.append(f"| extrapolated to a full run ({counts}) | {sum(summary['plan_counts'].values())} | "
                 f"{e['save_bytes'] / gb:.2f} GB | {e['layer_bytes'] / gb:.2f} GB |")
    for kind, k in summary["per_kind"].items():
        lines.append(f"| mean {kind} image ({k['measured']} measured) | 1 | {k['mean_save_bytes'] / gb:.2f} GB | "
                     f"{k['mean_own_layer_bytes'] / gb:.2f} GB{' (its own layers)' if kind != 'base' else ''} |")
    return "\n".join(lines)


def add_arguments(parser) -> None:
    parser.add_argument("--registry", required=True,
                        help="a registry on loopback, host:port[/path], that the daemon pushes to over HTTP")
    parser.add_argument("--image", action="append", default=None,
                        help="an image to measure (default: every cpython-perf, -tools and -base image here)")
    parser.add_argument("--aarch64", choices=ci_plan.AARCH64_PLACEMENTS, default="native")
    parser.add_argument("--json", default=None, help="also write the measurements and the summary to this file")


def _run_command(args) -> None:
    registry = check_registry(args.registry)
    client = host.docker_client()
    refs = args.image or local_images(client)
    measured = {}
    for ref in refs:
        kind = KINDS.get(ref.split(":", 1)[0])
        if kind is None:
            raise DriverError(f"{ref} is not a cpython-perf, -tools or -base image")
        image_id = client.images.get(ref).id
        print(f"{ref}: docker save | zstd -6 ...", file=sys.stderr, flush=True)
        save = saved_size(ref)
        print(f"{ref}: {save} bytes; pushing ...", file=sys.stderr, flush=True)
        measured[ref] = {"id": image_id, "kind": kind, "save": save, "layers": pushed_layers(client, ref, registry)}
    summary = summarize(measured, plan_counts(load_matrix(args.matrix), args.aarch64))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"images": measured, "summary": summary}, out, indent=1)
    print(table(summary))


COMMAND = Command("ci-budget", "what a CI run that rebuilds every image stores: this machine's images saved and "
                               "pushed to a loopback registry, extrapolated to the plan's image count "
                               "(cpython_perf/ci/budget.py; docs/ci.md)",
                  add_arguments, _run_command, description=__doc__.splitlines()[0])


def main(argv=None) -> int:
    return main_of(COMMAND, argv, prog="python -m cpython_perf.ci.budget")


if __name__ == "__main__":
    sys.exit(main())
