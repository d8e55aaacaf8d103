"""Profile your own program with real perf in a cell image, outputs written back to the host.

    python -m cpython_perf profile CELL [--mode perf|perf_jit] [--requirements FILE] [--out DIR] [-F HZ] \\
        -- script.py ARGS
    python -m cpython_perf profile --image IMAGE --python PATH [...] -- script.py ARGS

What it does, each command line printed as it runs:

1. The image.  A cell's `cpython-perf:<cell>` (built first if missing; used as it is if present, so
   `nox -s build-<cell>` refreshes a stale one), or with --image/--python any image and the path of a
   Python in it, as the conformance suite's external target takes them (cpython_perf.check.external).
2. The mode.  A cell may be profiled only in the perf modes it claims in matrix.yaml (anything else is
   a usage error naming the valid ones).  Default: `perf` where the cell claims it (every claim of
   `perf` is a build with frame pointers: perf record -g, unwound by the kernel, small perf.data, no
   post-processing), else the cell's only claim, `perf_jit` (release cells: no frame pointers; dwarf
   unwinding of a copied stack, then the recording injected with the trampolines' symbols and unwind
   tables: cpython_perf/record/jit_inject.py, perf inject --jit's work in one ELF per trampoline arena).
   An --image target claims nothing: its
   interpreter is probed (external.PYTHON_PROBE) and a mode it does not offer is refused; the default
   is `perf` where sysconfig's CFLAGS keep frame pointers, else `perf_jit` where offered.
3. The requirements (--requirements FILE).  The images have no pip, but CPython's bundled ensurepip
   makes one in a venv (checked: 3.9.2, 3.11.2 and 3.13.5 cells).  The venv is made once per
   (image id, python, requirements file contents) in a derived image,
   `cpython-perf-profile:<target>-<hash>`: a container of the image makes the venv at
   /opt/cpython-perf-venv and `pip install -r`s the file; the venv is copied out (a tar) and
   `docker build` adds it to the image (FROM its id, one ADD), tagged only when that succeeded, with
   nothing else of the install container (no mount point, no pip setting).  Why an image rather than
   a venv in a host cache directory mounted in: the venv's scripts and its pyvenv.cfg name absolute
   paths inside the image and its python links to the image's interpreter, so it is only valid with
   that image, whose id the tag's hash covers; Docker removes it with the image (`docker image
   prune`, `docker rmi`); and no root-owned files land in the user's home (the container runs as
   root).  pip in the container reaches the package index the host's pip is configured for
   (pip_passthrough: PIP_* settings of the environment and of pip's configuration files, their CA
   bundle and local index directories mounted read-only; proxy variables).  A requirements file's
   relative paths are read from its own directory (mounted at /requirements); changes to files it
   names are not in the hash: --reinstall makes the image again.
4. The recording.  One container of that image with the current directory at /src (the working
   directory: `script.py` runs as /src/script.py, its py:: symbols say so), the output directory at
   /out and its tmp/ at /tmp (perf-PID.map, jit-PID.dump and the jit-PID-arena-K.so files the
   injector writes, kept for `perf report` later), record/jit_inject.py at /opt/cpython-perf/
   (read-only), given the least capability perf needs
   (containers.perf_capability, plus IPC_LOCK).  Then, with the perf of the image and the cell's
   record options (perf_runs.record_options: `-g` for perf; `-k 1 --call-graph dwarf` and a ring
   buffer sized to the memlock limit for perf_jit), at -F 999 by default (-F 9999, the howto's and the
   suite's, for runs under a second):
       perf record ... -o /out/perf.data -- python -X MODE script.py ARGS
       python -E /opt/cpython-perf/jit_inject.py -i /out/perf.data -o /out/perf.jit.data \
           --fallback-perf perf                                            (perf_jit)
   The injector runs with the program's own python (stdlib only).  perf's own `perf inject --jit` writes
   one ELF per code object and slows down with their number (20,000 functions: about 3 minutes to inject
   and script): it is what --fallback-perf runs where the injector cannot do the work (a perf that
   unwinds without libunwind, a compressed recording; the reason is printed).
       perf script -F comm,pid,tid,time,event,ip,sym,dso -i DATA > /out/perf.script.txt
       perf report -i DATA --stdio --no-children ... > /out/perf.report.txt
5. The flame graph: inferno over perf.script.txt in the tools image (cpython_perf.report.flamegraph) ->
   /out/flamegraph.svg.
6. Ownership: the container runs as root (perf needs its capabilities); at the end everything under
   the output directory, and what the program created in the current directory during the run, is
   chowned to the invoking user.

The package, one module a job:

  target        Target: a cell's (cell_target) or an image and its python (external_target); the mode
                (choose_mode, default_mode)
  steps         the command lines run in the container, in order (profile_steps: perf record, the jit
                injection for perf_jit, perf script, perf report; record_options), the container's paths and the
                files a run writes, the hand-over of ownership
  requirements  --requirements: the derived image with a venv (ensure_requirements_image), pip with the
                host's settings (host_pip_settings, pip_passthrough)
  session       Session: the container the steps run in with docker exec, each command line printed and kept
  results       the output directory made ready, the flame graph drawn, the samples summarised, a flame
                graph's stacks read back
  commands      `python -m cpython_perf profile`: its arguments, run, main (COMMANDS, as every package's)

Exit status: 0; 2 for a usage error (unknown cell, unclaimed mode, no program); 1 when something
failed at run time (the program's own non-zero exit included: the outputs are written anyway).
"""
