"""A PyTorch worker process for test_torch_faults.py: a small MLP trained by
syncrep.torch.SyncReplicas on a fixed synthetic dataset read through
syncrep.ResumableSampler (so every committed step takes the same batches
whatever was killed).  Prints "round STEP" per round, "drained STEP" when a
SIGTERM drained it, "done" after EPOCHS epochs.

Usage: torch_worker.py ENDPOINT TASK TASKS EPOCHS DELAY_S"""

import sys
import time

import torch

import syncrep
from syncrep.torch import ResumableSampler, SyncReplicas


def make_model():
    """The model the workers train (test_torch_faults.py reads the final
    parameters into one by name)."""
    torch.manual_seed(11)
    return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def main():
    endpoint, task, tasks, epochs, delay = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                            int(sys.argv[4]), float(sys.argv[5]))
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(3)
    X = torch.randn(96, 5, generator=g)
    Y = X @ torch.randn(5, 2, generator=g) + 0.1 * torch.randn(96, 2, generator=g)
    model = make_model()
    with syncrep.Client(endpoint, task_index=task, timeout=30.0) as c:
        sync = SyncReplicas(model, c)
        sampler = ResumableSampler(c, len(X), 4, num_tasks=tasks, seed=5)
        try:
            while sampler.epoch < epochs:
                for batch in sampler:
                    time.sleep(delay)
                    model.zero_grad()
                    torch.nn.functional.mse_loss(model(X[batch]), Y[batch]).backward()
                    print("round", c.local_step, flush=True)
                    sync.step()
        except syncrep.Drained:
            print("drained", c.local_step, flush=True)
            raise
        print("done", flush=True)


if __name__ == "__main__":
    main()
