#!/usr/bin/env python3
"""The PyTorch bench row (issue 24, "How we will know"; docs/performance.md,
"Python"): a PyTorch worker loop (syncrep.torch.SyncReplicas) against the C
client (bench_model_loop, the model API) on the same job, measured in the
same run.  Reported, never asserted: the target is Python steps/s >= 0.9 of
C's, printed OK or MISS per cell (--enforce: exit 3 on a miss).

    bench/python/bench_torch.py [--build DIR] [--workers W] [--reps N] [--quick]
                                [--json FILE] [--coord-arg ARG]...

Cells: one 16 MiB float32 tensor, and 200 float32 tensors of 50 KiB.  For
each cell and repetition, each side gets a fresh coordinator (the real
`syncrep coordinator` on an ipc:// path in a temporary folder; R = W,
checkpoint every step, --sync normal, as bench/perf's row 6) and W worker
processes of its own kind; the two sides alternate which goes first.  A
worker runs WARM untimed rounds, then STEPS timed ones; the job's rate is
task 0's.  Neither side computes anything between rounds: the gradients are
set once (the C worker's buffer; the Python worker's ``p.grad`` tensors, as
``loss.backward()`` would leave them) and each round is one step call, so
the ratio is what the Python and torch layer costs over C.

`worker` mode (``bench_torch.py worker ENDPOINT TASK NTENSORS TENSOR_BYTES
WARM STEPS``) is the Python side's process; it prints the line
bench_model_loop prints.  Every process this program starts is ended by its
PID; the temporary folder is removed.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PY = "/usr/bin/python3"
LR = "0.0009765625"  # bench/perf's LR_TEXT: values stay exact and finite
KIB, MIB = 1024, 1024 * 1024
TARGET = 0.9
# (label, tensors, bytes each, warm rounds, timed rounds; --quick: half)
CELLS = [("1x16MiB", 1, 16 * MIB, 3, 40), ("200x50KiB", 200, 50 * KIB, 5, 60)]


def worker(argv):
    """The Python side: SyncReplicas over a module of NTENSORS float32
    parameters, the gradients set once, WARM + STEPS rounds of step()."""
    endpoint, task, n, nbytes, warm, steps = argv[0], *[int(a) for a in argv[1:]]
    import torch

    import syncrep
    from syncrep.torch import SyncReplicas

    torch.set_num_threads(1)
    model = torch.nn.Module()
    for i in range(n):
        p = torch.nn.Parameter(torch.zeros(nbytes // 4))
        p.grad = torch.full_like(p, 0.001)
        model.register_parameter("t%04d_weight" % i, p)
    with syncrep.Client(endpoint, task_index=task, timeout=60.0) as c:
        sync = SyncReplicas(model, c, drain_on_sigterm=False)
        for s in range(warm + steps):
            if s == warm:
                t0 = time.perf_counter()
            sync.step()
        sec = time.perf_counter() - t0
    print("steps %d seconds %.6f steps_per_s %.3f" % (steps, sec, steps / sec), flush=True)


class Run:
    """One job: a coordinator and W workers of one side, all ended by PID."""

    def __init__(self, args, tmp, name):
        self.args, self.dir = args, os.path.join(tmp, name)
        os.mkdir(self.dir)
        self.endpoint = "ipc://" + os.path.join(self.dir, "coord.sock")
        self.procs = []

    def spawn(self, cmd, log, env=None):
        f = open(os.path.join(self.dir, log), "wb")
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
        f.close()
        self.procs.append((p, log))
        return p

    def log(self, name):
        with open(os.path.join(self.dir, name), "rb") as f:
            return f.read().decode(errors="replace")

    def end(self):
        for p, _ in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()

    def go(self, side, n, nbytes, warm, steps):
        a = self.args
        coord = self.spawn([a.syncrep, "coordinator", "--store", os.path.join(self.dir, "s.db"),
                            "--bind", self.endpoint, "--replicas-to-aggregate", str(a.workers),
                            "--learning-rate", LR, "--checkpoint-every-steps", "1",
                            "--sync", "normal", "--log-level", "notice"] + a.coord_arg,
                           "coordinator.log")
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
                   SYNCREP_LIBRARY=a.library, SYNCREP_BIN=a.syncrep)
        shape = [str(n), str(nbytes), str(warm), str(steps)]
        ws = []
        for t in range(a.workers):
            cmd = ([a.model_loop, self.endpoint, str(t)] if side == "C" else
                   [PY, os.path.abspath(__file__), "worker", self.endpoint, str(t)]) + shape
            ws.append(self.spawn(cmd, "w%d.log" % t, env))
        deadline = time.monotonic() + a.timeout
        for i, w in enumerate(ws):
            try:
                w.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise RuntimeError("%s worker %d ran past %d s" % (side, i, a.timeout)) from None
            if w.returncode != 0:
                raise RuntimeError("%s worker %d exited %d:\n%s" % (side, i, w.returncode,
                                                                     self.log("w%d.log" % i)))
        coord.send_signal(signal.SIGTERM)
        if coord.wait(30) != 0:
            raise RuntimeError("coordinator exited %d:\n%s" % (coord.returncode,
                                                               self.log("coordinator.log")))
        out = self.log("w0.log").split()
        return float(out[out.index("steps_per_s") + 1])


def measure(args):
    tmp = tempfile.mkdtemp(prefix="bench-torch-")
    cells, k = [], 0
    try:
        print("# python: W=%d workers, float32, R = W, checkpoint every step, --sync normal;\n"
              "#   PyTorch loop (syncrep.torch.SyncReplicas.step) vs C loop "
              "(sr_client_model_step), same run, fresh coordinator per run" % args.workers)
        print("# %-12s %12s %12s %8s %8s %7s" % ("cell", "python", "C", "unit", "ratio",
                                                   "result"))
        for label, n, nbytes, warm, steps in CELLS:
            if args.quick:
                warm, steps = max(2, warm // 2), max(10, steps // 2)
            got = {"C": [], "python": []}
            for rep in range(args.reps):
                order = ("C", "python") if rep % 2 == 0 else ("python", "C")
                for side in order:
                    run = Run(args, tmp, "r%d" % k)
                    k += 1
                    try:
                        got[side].append(run.go(side, n, nbytes, warm, steps))
                    finally:
                        run.end()
                    shutil.rmtree(run.dir, ignore_errors=True)
            py, c = statistics.median(got["python"]), statistics.median(got["C"])
            ratio = py / c
            cells.append({"cell": "%s W=%d" % (label, args.workers), "python_steps_per_s": py,
                          "c_steps_per_s": c, "python_reps": got["python"], "c_reps": got["C"],
                          "ratio": ratio, "target": ">= %.1f" % TARGET, "met": ratio >= TARGET})
            print("  %-12s %12.2f %12.2f %8s %8.2f %7s" % (
                cells[-1]["cell"], py, c, "steps/s", ratio, "OK" if ratio >= TARGET else "MISS"),
                flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return cells


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        return worker(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build folder")
    ap.add_argument("--workers", type=int, default=2, help="W (default 2)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per cell (medians)")
    ap.add_argument("--quick", action="store_true", help="1 repetition, half the rounds")
    ap.add_argument("--timeout", type=int, default=300, help="seconds a run may take")
    ap.add_argument("--coord-arg", action="append", default=[],
                    help="append to every coordinator command line (repeatable)")
    ap.add_argument("--enforce", action="store_true", help="exit 3 when a target is missed")
    ap.add_argument("--json", help="also write the results as JSON")
    args = ap.parse_args()
    if args.quick:
        args.reps = 1
    if args.workers < 1 or args.reps < 1:
        ap.error("--workers and --reps must be >= 1")
    args.syncrep = os.path.join(args.build, "cli", "syncrep")
    args.library = os.path.join(args.build, "worker", "libsyncrep.so")
    args.model_loop = os.path.join(args.build, "bench", "python", "bench_model_loop")
    for path in (args.syncrep, args.library, args.model_loop):
        if not os.path.exists(path):
            ap.error("%s is missing: build first (cmake --build %s)" % (path, args.build))
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print("# python: SKIPPED (%s; ./run test installs python3-numpy python3-torch)" % e)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"skipped": str(e)}, f)
        return 0
    t0 = time.monotonic()
    cells = measure(args)
    missed = sum(not c["met"] for c in cells)
    print("# %d cells, %d targets missed, %.0f s" % (len(cells), missed, time.monotonic() - t0))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"workers": args.workers, "reps": args.reps, "cells": cells}, f, indent=1)
    return 3 if args.enforce and missed else 0


if __name__ == "__main__":
    sys.exit(main())
