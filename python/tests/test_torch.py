"""syncrep.torch.SyncReplicas: two workers train a small model with a sparse
embedding, a frozen parameter and a parameter that gets no gradient; the
result is what averaging the two replicas' gradients and applying SGD gives
(the reference computed here with plain torch)."""

import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import syncrep  # noqa: E402
from syncrep.torch import SyncReplicas  # noqa: E402

LR = 0.1
STEPS = 6


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.emb = torch.nn.Embedding(6, 3, sparse=True)
        self.lin = torch.nn.Linear(3, 2)
        self.unused = torch.nn.Linear(2, 2)  # never in forward: no gradient
        self.scale = torch.nn.Parameter(torch.tensor([2.0]), requires_grad=False)
        self.wide = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
        for p in self.parameters():
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))

    def forward(self, ids):
        return self.lin(self.emb(ids)) * self.scale + self.wide.float()


def batch(task, step):
    g = torch.Generator().manual_seed(100 * task + step)
    ids = torch.randint(0, 6, (4,), generator=g)
    y = torch.randn(4, 2, generator=g)
    return ids, y


def loss_of(model, task, step):
    ids, y = batch(task, step)
    return torch.nn.functional.mse_loss(model(ids), y)


def worker(endpoint, task, out, errors):
    try:
        model = Net()
        if task != 0:  # the chief's values win: start the others elsewhere
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(1.0)
        with syncrep.Client(endpoint, task_index=task, timeout=20.0) as c:
            sync = SyncReplicas(model, c)
            for _ in range(STEPS):
                step = c.local_step
                model.zero_grad()
                loss_of(model, task, step).backward()
                sync.step()
            out[task] = {n: p.detach().clone() for n, p in model.named_parameters()}
    except Exception as e:  # reported by the test's thread
        errors.append(e)


def reference():
    model = Net()
    for step in range(STEPS):
        grads = []
        for task in range(2):
            model.zero_grad()
            loss_of(model, task, step).backward()
            grads.append({n: (p.grad.to_dense().clone() if p.grad is not None else None)
                          for n, p in model.named_parameters()})
        with torch.no_grad():
            for n, p in model.named_parameters():
                if grads[0][n] is not None:
                    p -= LR * (grads[0][n] + grads[1][n]) / 2
    return {n: p.detach() for n, p in model.named_parameters()}


def test_two_workers_match_averaged_sgd(coordinator):
    coord = coordinator("--replicas-to-aggregate", "2", "--learning-rate", str(LR),
                        "--init-tokens", "0", "--sparse-mean", "per-replica")
    out, errors = {}, []
    ts = [threading.Thread(target=worker, args=(coord.endpoint, t, out, errors)) for t in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errors, errors
    want = reference()
    for task in (0, 1):
        for n, p in want.items():
            torch.testing.assert_close(out[task][n], p, rtol=1e-5, atol=1e-6, msg=lambda m: n + ": " + m)
    # The frozen parameter and the one without a gradient kept their values.
    torch.testing.assert_close(out[0]["scale"], Net().scale.detach())
    torch.testing.assert_close(out[0]["unused.weight"], Net().unused.weight.detach())
    assert coord.stop() == 0


def test_unsupported_parameters_refused_at_construction(coordinator):
    coord = coordinator("--replicas-to-aggregate", "1", "--learning-rate", "1.0")
    model = torch.nn.Linear(2, 2).to(torch.float16)
    with syncrep.Client(coord.endpoint, task_index=0, timeout=10.0) as c:
        with pytest.raises(syncrep.Error, match="float16") as e:
            SyncReplicas(model, c)
        assert e.value.code == "SR_EINVAL"
    assert coord.stop() == 0
