"""``syncrep.torch``: a PyTorch model trained by a syncrep job.

    from syncrep.torch import SyncReplicas
    sync = SyncReplicas(model, client)
    for x, y in loader:
        loss = loss_fn(model(x), y)
        model.zero_grad()
        loss.backward()
        sync.step()

``SyncReplicas(model, client)`` declares every parameter by its name in
``model.named_parameters()`` as one model (``Client.declare_model``, the
model API: the coordinator keeps the tensors in a few packs; the chief,
task 0, gives its values; a parameter with ``requires_grad=False`` is
frozen, one whose gradient is sparse, from ``nn.Embedding(sparse=True)``, a
sparse tensor), marks the model ready (chief) or waits for it, and loads the
coordinator's values into the model.  ``step()`` is one ``Client.model_step``
per round: every dense gradient, the step token and the fresh values in one
call (the sparse gradients as sparse pushes just before it; a parameter that
got no gradient this round pushes zeros, so every step still takes R
gradients of every variable).  Gradients and values pass as buffers without
a copy where torch allows (CPU, C-contiguous: the values are written into
the parameters' own memory); a parameter on a GPU or not contiguous goes
through a host array, one copy each way.

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

import ctypes

import numpy as np
import torch

from . import drain
from .data import ResumableSampler  # noqa: F401 (re-exported: syncrep.torch.ResumableSampler)
from .errors import invalid
from .load import load as _load

_NUMPY = {torch.float32: np.float32, torch.float64: np.float64}
_DENSE, _FROZEN, _SPARSE = "dense", "frozen", "sparse"


def _sparse_params(model):
    """Names of the parameters whose gradient is sparse (Embedding(sparse=True))."""
    names = set()
    for mname, m in model.named_modules():
        if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and m.sparse:
            names.add((mname + "." if mname else "") + "weight")
    return names


def _shares(t):
    """A numpy array over tensor ``t``'s own memory (a CPU, C-contiguous
    float32/float64 tensor: ``.numpy()`` shares it), else None."""
    if t.device.type != "cpu" or not t.is_contiguous() or t.dtype not in _NUMPY:
        return None
    a = t.detach().numpy()
    return a if a.size == 0 or a.ctypes.data == t.data_ptr() else None


def _host(t):
    """Tensor ``t`` as a C-contiguous numpy array on the host: its own memory
    where torch allows (``_shares``), else one copy."""
    a = _shares(t)
    return a if a is not None else t.detach().cpu().contiguous().numpy()


class SyncReplicas:
    """Replaces ``optimizer.step()`` in a PyTorch loop with a synchronous
    step of a syncrep job (see the module's text)."""

    def __init__(self, model, client, chief=None, drain_on_sigterm=True):
        self.model = model
        self.client = client
        self.chief = client.task_index == 0 if chief is None else bool(chief)
        self._params = []  # [(name, parameter, kind)] in the declared order
        seen = set()
        sparse = _sparse_params(model)
        for name, p in model.named_parameters():
            if p.dtype not in _NUMPY:
                raise invalid("SyncReplicas: parameter %s is %s; only float32 and float64 "
                              "parameters can be trained by syncrep" % (name, p.dtype))
            if id(p) in seen:
                continue  # a shared (tied) parameter is declared once
            seen.add(id(p))
            kind = _FROZEN if not p.requires_grad else _SPARSE if name in sparse else _DENSE
            self._params.append((name, p, kind))
        if not self._params:
            raise invalid("SyncReplicas: the model has no parameters")
        if drain_on_sigterm:
            drain.install()
        # One model call per round (issue 23's packs): the chief's values
        # initialise the store; the others' give only dtype and shape.
        client.declare_model([(name, _host(p)) for name, p, _ in self._params],
                             frozen=[n for n, _, k in self._params if k == _FROZEN],
                             sparse=[n for n, _, k in self._params if k == _SPARSE])
        client.ready()
        self._bind_values()
        self.load()
        # The gradients' address array, kept from round to round: a
        # parameter's .grad is the same tensor every round (backward
        # accumulates into it) unless it was set to None or replaced, so
        # only those entries are made again (_grad_pointers).
        n = len(self._params)
        self._gp = (ctypes.c_void_p * n)()
        self._gsrc = [None] * n  # the .grad tensor whose memory _gp[i] points at
        self._gkeep = [None] * n  # the array _gp[i] points into (kept alive)

    def _bind_values(self):
        """Where the fresh values go: into the parameters' own memory where
        torch allows (CPU, contiguous), elsewhere into a host array copied
        into the parameter after each pull; and the model call's address
        array of those."""
        self._outs, self._staged, self._addr = [], [], []
        for _, p, _ in self._params:
            a = _shares(p)
            if a is None:
                a = np.empty(tuple(p.shape), _NUMPY[p.dtype])
                self._staged.append((p, a))
            self._outs.append(a)
            self._addr.append(p.data_ptr())
        self._vp = self.client._model_pointers(self._outs, "SyncReplicas", True)

    def _values_moved(self):
        """A parameter's memory was replaced since _bind_values (``p.data =
        ...``, ``model.to(...)``)."""
        return any(p.data_ptr() != a for (_, p, _), a in zip(self._params, self._addr))

    def _copy_staged(self):
        if self._staged:
            with torch.no_grad():
                for p, a in self._staged:
                    p.copy_(torch.from_numpy(a))

    def load(self):
        """Copy the coordinator's current values into the model's parameters."""
        if self._values_moved():
            self._bind_values()
        self.client.model_pull(self._outs)
        self._copy_staged()

    def _grad_pointers(self):
        """This round's gradients as the model call's address array, in the
        declared order (NULL: a zero gradient, or a tensor not pushed in the
        call); sparse tensors' rows are pushed here, before the call."""
        gp = self._gp
        for i, (name, p, kind) in enumerate(self._params):
            if kind == _FROZEN:
                continue
            g = p.grad
            if kind == _SPARSE:
                self._push_rows(name, p, g)
                continue
            if g is not None and g is self._gsrc[i] and g.data_ptr() == gp[i]:
                continue  # the same tensor as last round, in place
            self._gsrc[i] = None
            if g is None:
                a = None
            else:
                d = g.to_dense() if g.is_sparse else g
                a = _shares(d)
                if a is not None and d is g:
                    self._gsrc[i] = g
                elif a is None:
                    a = d.detach().cpu().contiguous().numpy()  # one copy
            self._gkeep[i] = a
            gp[i] = a.ctypes.data if a is not None else None
        return gp

    def _push_rows(self, name, p, g):
        if g is None:  # no row touched this round: an empty sparse push still counts
            idx = np.empty(0, np.int64)
            rows = np.empty((0,) + tuple(p.shape[1:]), _NUMPY[p.dtype])
        elif g.is_sparse:
            g = g.coalesce()
            idx = g.indices()[0].to(torch.int64).cpu().contiguous().numpy()
            rows = _host(g.values())
        else:  # a dense gradient of a sparse embedding (used elsewhere too): every row
            idx = np.arange(p.shape[0], dtype=np.int64)
            rows = _host(g)
        self.client.push_sparse(name, idx, rows)

    def step(self):
        """Push this round's gradients, take the token, load the new values,
        in one model call (``Client.model_step``; sparse gradients as sparse
        pushes just before it).  Returns the new local step.  After a SIGTERM
        (``syncrep.drain``) the round still completes, then
        ``syncrep.Drained`` (exit status 0) is raised.  The one place a
        round's pushes, token and pull happen."""
        if self._values_moved():
            self._bind_values()
        step = self.client._model_step_at(self._grad_pointers(), self._vp)
        self._copy_staged()
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
