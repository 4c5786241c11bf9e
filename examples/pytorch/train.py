"""A small CNN on Fashion-MNIST, trained by a syncrep job from PyTorch.

One process per worker; the job's place comes from the environment
(SYNCREP_COORDINATOR, SYNCREP_TASK_INDEX, or torchrun's RANK, ...).  Task 0,
the chief, measures the test accuracy every --eval-every steps and ends the
job (Client.finish) at --target or at --max-steps; the others then stop
(syncrep.Done) and exit 0.  Data: Debian's dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist, or --data), read with numpy, never
downloaded.  Every worker reads its shard of each epoch through
syncrep.ResumableSampler, so a killed and restarted worker (or coordinator)
neither repeats nor skips samples; SIGTERM drains (the round finishes, exit
0).  scripts/demo_pytorch.sh (./run demo pytorch) runs a chief and three
workers and kills the coordinator and a worker midway.  docs/example.md.

    SYNCREP_COORDINATOR=tcp://127.0.0.1:7070 SYNCREP_TASK_INDEX=0 \\
        python3 examples/pytorch/train.py --tasks 4
"""

import argparse
import gzip
import os
import sys
import time

import numpy as np
import torch

import syncrep
from syncrep.torch import ResumableSampler, SyncReplicas


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data, kind):
    x = read_idx(os.path.join(data, "%s-images-idx3-ubyte.gz" % kind))
    y = read_idx(os.path.join(data, "%s-labels-idx1-ubyte.gz" % kind))
    x = torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1)
    return (x - 0.2860) / 0.3530, torch.from_numpy(y.astype(np.int64))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(16, 32, 5, padding=2)
        self.fc1 = torch.nn.Linear(32 * 7 * 7, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        right = sum(int((model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum())
                    for i in range(0, len(x), 1000))
    model.train()
    return right / len(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("DATA_DIR",
                                                     "/usr/share/datasets/fashion-mnist"))
    ap.add_argument("--tasks", type=int, required=True, help="workers in the job (N)")
    ap.add_argument("--batch", type=int, default=32, help="per worker and step")
    ap.add_argument("--target", type=float, default=0.90, help="test accuracy to stop at")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--max-steps", type=int, default=4000)
    args = ap.parse_args()
    torch.set_num_threads(1)  # one core's worth per process
    torch.manual_seed(0)  # the chief's initial values; the others get the chief's
    xtr, ytr = load(args.data, "train")
    model = Net()
    with syncrep.Client.from_env(timeout=120.0) as c:
        sync = SyncReplicas(model, c)
        sampler = ResumableSampler(c, len(xtr), args.batch, num_tasks=args.tasks, seed=1)
        chief = c.task_index == 0
        if chief:
            xte, yte = load(args.data, "t10k")
        t0 = time.monotonic()
        try:
            while True:
                for batch in sampler:
                    loss = torch.nn.functional.cross_entropy(model(xtr[batch]), ytr[batch])
                    model.zero_grad()
                    loss.backward()
                    step = sync.step()
                    if chief and step % 10 == 0:
                        print("step %d loss %.4f epoch %d" % (step, float(loss), sampler.epoch),
                              flush=True)
                    if chief and (step % args.eval_every == 0 or step >= args.max_steps):
                        acc = accuracy(model, xte, yte)
                        print("step %d test accuracy %.2f %% (%.1f s)" %
                              (step, 100 * acc, time.monotonic() - t0), flush=True)
                        if acc >= args.target or step >= args.max_steps:
                            c.finish()
                            print("RESULT accuracy %.2f %% at step %d, %s" %
                                  (100 * acc, step, "target reached" if acc >= args.target
                                   else "budget spent"), flush=True)
                            return 0 if acc >= args.target else 1
        except syncrep.Done as e:
            print("task %d: %s" % (c.task_index, e.message), flush=True)
            return 0


if __name__ == "__main__":
    sys.exit(main())
