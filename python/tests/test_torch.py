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


def test_one_model_call_per_round_without_copies(coordinator):
    """step() is one model call per round: the values land in the
    parameters' own memory (CPU, contiguous), the gradients are read where
    they lie, a .grad replaced or set to None between rounds is seen, a
    parameter that is not contiguous goes through a host array, and one
    whose memory is replaced (p.data = ...) is rebound.  The values are
    exact against SGD by hand (lr 0.5, R = 1, float32 sums of halves)."""
    coord = coordinator("--replicas-to-aggregate", "1", "--learning-rate", "0.5",
                        "--init-tokens", "0")
    model = torch.nn.Module()
    model.a = torch.nn.Parameter(torch.tensor([1.0, 2.0, 3.0]))
    model.t = torch.nn.Parameter(torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]).t())
    assert not model.t.is_contiguous()
    want = {"a": model.a.detach().clone(), "t": model.t.detach().clone()}
    with syncrep.Client(coord.endpoint, task_index=0, timeout=20.0) as c:
        sync = SyncReplicas(model, c, drain_on_sigterm=False)
        a_ptr = model.a.data_ptr()
        pushes = c.stats()["pushes"]

        def round_(ga, gt):
            for name, g in (("a", ga), ("t", gt)):
                if g is not None:
                    want[name] -= 0.5 * g
            sync.step()
            for name, p in model.named_parameters():
                torch.testing.assert_close(p.detach(), want[name], rtol=0, atol=0)

        model.a.grad = torch.tensor([1.0, 1.0, 1.0])
        model.t.grad = torch.ones(2, 3)
        round_(model.a.grad, model.t.grad)
        model.a.grad.mul_(2.0)  # in place: the same tensor as last round
        round_(model.a.grad, model.t.grad)
        model.a.grad = torch.tensor([0.5, 0.0, -0.5])  # replaced
        model.t.grad = None  # no gradient this round: zeros
        round_(model.a.grad, None)
        assert model.a.data_ptr() == a_ptr  # written in place, never reallocated
        with torch.no_grad():
            model.a.data = torch.tensor([7.0, 7.0, 7.0])  # memory replaced
        want["a"] = want["a"].clone()  # the coordinator's value is still the trained one
        round_(model.a.grad, None)
        assert c.local_step == 4
        # One model call per round: one push per round (the one float32
        # pack's), never one per parameter.
        assert c.stats()["pushes"] - pushes == 4
    assert coord.stop() == 0
