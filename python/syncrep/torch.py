"""``syncrep.torch``: a PyTorch model trained by a syncrep job.

    from syncrep.torch import SyncReplicas
    sync = SyncReplicas(model, client)
    for x, y in loader:
        loss = loss_fn(model(x), y)
        model.zero_grad()
        loss.backward()
        sync.step()

``SyncReplicas(model, client)`` declares every parameter by its name in
``model.named_parameters()`` (the chief, task 0, gives its values; a
parameter with ``requires_grad=False`` is declared not trainable), marks the
model ready (chief) or waits for it, and loads the coordinator's values into
the model.  ``step()`` pushes every trainable parameter's gradient (a sparse
gradient, from ``nn.Embedding(sparse=True)``, as a sparse push; a parameter
that got no gradient this round pushes zeros, so every step still takes R
gradients of every variable), takes the step token and loads the new values.

The optimizer runs in the coordinator (``--optimizer``, ``--learning-rate``
...): do not step a local ``torch.optim`` optimizer as well.  Buffers (such
as BatchNorm's running statistics) are not synchronised: each worker keeps
its own, as ``DistributedDataParallel(broadcast_buffers=False)`` would.
Parameters must be float32 or float64; anything else is refused here, not
mid-training.  docs/python.md has the mapping from torch.optim settings.

SIGTERM drains: ``SyncReplicas`` installs ``syncrep.drain`` (main thread),
so a SIGTERM lets the round in progress finish (its pushes, its token, the
new values) and then ``step()`` raises ``syncrep.Drained``, a
``SystemExit(0)``: the worker exits 0 having lost nothing
(``drain_on_sigterm=False`` leaves SIGTERM alone).

``ResumableSampler`` (``syncrep.data``): exactly-once data across restarts
for a ``DataLoader``'s ``batch_sampler``.

``load_into(model, "store.db")`` loads a trained model's parameters (of the
latest step, or a retained ``step=``) from a store, an ``.npz`` or a
``.safetensors`` export into a module, for evaluation or inference.
"""

import numpy as np
import torch

from . import drain
from .data import ResumableSampler  # noqa: F401 (re-exported: syncrep.torch.ResumableSampler)
from .errors import invalid
from .load import load as _load

_NUMPY = {torch.float32: np.float32, torch.float64: np.float64}


def _sparse_params(model):
    """Names of the parameters whose gradient is sparse (Embedding(sparse=True))."""
    names = set()
    for mname, m in model.named_modules():
        if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and m.sparse:
            names.add((mname + "." if mname else "") + "weight")
    return names


class SyncReplicas:
    """Replaces ``optimizer.step()`` in a PyTorch loop with a synchronous
    step of a syncrep job (see the module's text)."""

    def __init__(self, model, client, chief=None, drain_on_sigterm=True):
        if drain_on_sigterm:
            drain.install()
        self.model = model
        self.client = client
        self.chief = client.task_index == 0 if chief is None else bool(chief)
        self._params = []
        seen = set()
        sparse = _sparse_params(model)
        for name, p in model.named_parameters():
            if p.dtype not in _NUMPY:
                raise invalid("SyncReplicas: parameter %s is %s; only float32 and float64 "
                              "parameters can be trained by syncrep" % (name, p.dtype))
            if id(p) in seen:
                continue  # a shared (tied) parameter is declared once
            seen.add(id(p))
            self._params.append((name, p, name in sparse))
        if not self._params:
            raise invalid("SyncReplicas: the model has no parameters")
        for name, p, _ in self._params:
            host = p.detach().cpu().numpy()
            if self.chief:
                client.declare(name, host, trainable=p.requires_grad)
            else:
                client.declare(name, None, trainable=p.requires_grad, dtype=host.dtype,
                               shape=host.shape)
        client.ready()
        self._host = {name: np.empty(tuple(p.shape), _NUMPY[p.dtype]) for name, p, _ in
                      self._params}
        self.load()

    def load(self):
        """Copy the coordinator's current values into the model's parameters."""
        names = [name for name, _, _ in self._params]
        outs = self.client.pull_many(names, [self._host[n] for n in names])
        with torch.no_grad():
            for (name, p, _), host in zip(self._params, outs):
                p.copy_(torch.from_numpy(host))

    def _push(self):
        dense = []
        for name, p, sparse in self._params:
            if not p.requires_grad:
                continue
            g = p.grad
            if g is not None and g.is_sparse:
                g = g.coalesce()
                idx = g.indices()[0].to(torch.int64).cpu().contiguous().numpy()
                rows = g.values().detach().cpu().contiguous().numpy()
                self.client.push_sparse(name, idx, rows)
                continue
            if sparse and g is None:
                # No row touched this round: an empty sparse push still counts.
                rows = np.empty((0,) + tuple(p.shape[1:]), _NUMPY[p.dtype])
                self.client.push_sparse(name, np.empty(0, np.int64), rows)
                continue
            if g is None:
                host = np.zeros(tuple(p.shape), _NUMPY[p.dtype])
            else:
                host = g.detach().cpu().contiguous().numpy()
            dense.append((name, host))
        if dense:
            self.client.push_many(dense)

    def step(self):
        """Push this round's gradients, take the token, load the new values.
        Returns the new local step.  After a SIGTERM (``syncrep.drain``) the
        round still completes, then ``syncrep.Drained`` (exit status 0) is
        raised.  The one place a round's pushes, token and pull happen."""
        self._push()
        step = self.client.step()
        self.load()
        if drain.requested():
            raise drain.Drained()
        return step


def load_into(module, path, step=None, strict=True):
    """Copy the parameters saved in ``path`` (a store, ``.npz`` or
    ``.safetensors``; see :func:`syncrep.load`) into ``module``'s parameters
    of the same names, in place (converted to each parameter's dtype and
    device).  Optimizer slots and EMA shadows (``VAR/slot``) are skipped;
    buffers are left alone (syncrep does not train them).  With ``strict``,
    a module parameter missing from the file, a variable of the file the
    module lacks, or a shape that differs raises :class:`syncrep.Error`
    (SR_EINVAL) before anything is copied.  Returns ``(missing, unexpected)``,
    the names of each kind."""
    arrays = _load(path, step=step)
    values = {n: a for n, a in arrays.items()
              if "/" not in n or n.rsplit("/", 1)[0] not in arrays}
    params = dict(module.named_parameters())
    missing = sorted(n for n in params if n not in values)
    unexpected = sorted(n for n in values if n not in params)
    wrong = ["%s: %s in the file, %s in the module" % (n, tuple(values[n].shape),
                                                        tuple(params[n].shape))
             for n in sorted(params) if n in values and
             tuple(values[n].shape) != tuple(params[n].shape)]
    if wrong or (strict and (missing or unexpected)):
        raise invalid("load_into(%s): %s" % (path, "; ".join(
            wrong + (["missing from the file: " + ", ".join(missing)] if missing else []) +
            (["not in the module: " + ", ".join(unexpected)] if unexpected else []))))
    with torch.no_grad():
        for n, p in params.items():
            if n in values:
                p.copy_(torch.from_numpy(np.ascontiguousarray(values[n])))
    return missing, unexpected
