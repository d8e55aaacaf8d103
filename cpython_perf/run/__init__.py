"""Running programs in images: a fresh container of an image with the least privilege that lets perf work, and
whether the engine sees this machine's paths (containers.py); a qemu-system guest booted from a foreign-arch
cell's own image, where perf samples the emulated kernel (guest.py); and the runners the conformance suite runs
its checks through (runners.py).  The record, check, bench and profile commands run their programs here."""
