"""``syncrep.Client``: a worker's connection to the coordinator, over libsyncrep.

Arrays travel as buffers: a push reads the numpy array's memory in place, a
pull writes into a numpy array's memory; nothing is converted to Python
objects.  Every argument is checked here before anything is sent (a wrong
dtype, shape or buffer is ``syncrep.Error`` with code ``SR_EINVAL``); every
failure of the C library becomes a ``syncrep.Error`` (``syncrep.TimeoutError``
for ``SR_ETIMEDOUT``) carrying the library's message.
"""

import ctypes

import numpy as np

from . import _lib, env
from ._lib import lib
from .errors import from_code, invalid

_DTYPES = {
    np.dtype(np.float32): _lib.FLOAT32,
    np.dtype(np.float64): _lib.FLOAT64,
    np.dtype(np.int32): _lib.INT32,
    np.dtype(np.int64): _lib.INT64,
}
_NOT_TRAINABLE = 0x1  # SR_DECLARE_NOT_TRAINABLE


def _dtype_code(dtype, what):
    try:
        return _DTYPES[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise invalid("%s: dtype %s is not one of float32, float64, int32, int64" %
                      (what, dtype)) from None


def _name_bytes(name):
    if not isinstance(name, str):
        raise invalid("a variable name is a str, not %s" % type(name).__name__)
    return name.encode("utf-8", "surrogateescape")


def _network_options(given):
    """The network keyword arguments of ``Client(...)``, checked: the
    fields of ``_lib.NETWORK_OPTIONS`` (sr_client_options' last six), each
    an int >= -1 that fits a C int.  The ranges of each are the library's
    (sr_client_open refuses a value out of its range, naming it)."""
    for name, value in given.items():
        if name not in _lib.NETWORK_OPTIONS:
            raise TypeError("Client() got an unexpected keyword argument %r (the network "
                            "options are %s)" % (name, ", ".join(_lib.NETWORK_OPTIONS)))
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or \
                not -1 <= value <= 0x7FFFFFFF:
            raise invalid("Client: %s must be an int: 0 (default), -1 (off) or a value in its "
                          "range (docs/network.md), not %r" % (name, value))
    return {name: int(value) for name, value in given.items()}


class _Var:
    __slots__ = ("dtype", "shape", "nbytes", "trainable")

    def __init__(self, dtype, shape, trainable):
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(d) for d in shape)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.trainable = trainable


class Client:
    """A worker of a syncrep job (one per process and task index).

    ``Client(endpoint, task_index=0, timeout=60.0, server_public_key=None,
    public_key=None, secret_key=None, **network)`` connects and says hello;
    ``timeout`` (seconds) is how long the coordinator may be unreachable
    before a call raises ``syncrep.TimeoutError``.  The three keys (Z85 text)
    turn CURVE on.  ``network`` is any of the six network options of
    ``sr_client_options`` under their C names (docs/network.md):
    ``heartbeat_ivl_ms``, ``heartbeat_timeout_ms``, ``connect_timeout_ms``,
    ``tcp_keepalive_idle_s``, ``tcp_keepalive_intvl_s``,
    ``tcp_keepalive_cnt``; each an int, 0 (the default: the environment's
    ``SYNCREP_<NAME>``, else the library's) or -1 (off, where the option
    allows it) or a value in the option's range (the library checks it at
    open, naming the option).  One thread at a time may use a client.
    """

    def __init__(self, endpoint, task_index=0, timeout=60.0, server_public_key=None,
                 public_key=None, secret_key=None, **network):
        if not isinstance(task_index, int) or task_index < 0:
            raise invalid("task_index must be an int >= 0, not %r" % (task_index,))
        if timeout is None or timeout <= 0:
            raise invalid("timeout must be > 0 seconds, not %r" % (timeout,))
        net = _network_options(network)
        self._vars = {}
        self._model = None  # [(name, _Var)] in the declared order (declare_model)
        self._c = ctypes.c_void_p()
        self._keep = [s.encode() if s is not None else None
                      for s in (endpoint, server_public_key, public_key, secret_key)]
        o = _lib.Options(self._keep[0], task_index, max(1, int(timeout * 1000)), self._keep[1],
                         self._keep[2], self._keep[3], **net)
        rc = lib.sr_client_open(ctypes.byref(self._c), ctypes.byref(o))
        if rc < 0:
            self._c = None
            raise from_code(rc, lib.sr_errdetail().decode(errors="replace"))
        self.task_index = task_index
        self.endpoint = endpoint

    @classmethod
    def from_env(cls, environ=None, timeout=60.0, **network):
        """A client for the job the environment describes (``syncrep.env``):
        ``SYNCREP_COORDINATOR`` and ``SYNCREP_TASK_INDEX``, else torchrun's
        ``RANK``, Kubeflow's ``PET_NODE_RANK`` or Slurm's ``SLURM_PROCID``;
        CURVE keys from ``SYNCREP_SERVER_PUBLIC_KEY``, ``SYNCREP_PUBLIC_KEY``,
        ``SYNCREP_SECRET_KEY``; the network options as ``Client``'s keyword
        arguments (a 0 or absent one: ``SYNCREP_<NAME>``, read by the
        library)."""
        p = env.place(environ)
        return cls(p.endpoint, task_index=p.task_index, timeout=timeout,
                   server_public_key=p.server_public_key, public_key=p.public_key,
                   secret_key=p.secret_key, **network)

    # ---- lifetime ----------------------------------------------------------

    def close(self):
        """Say goodbye and free the client; later calls raise ``syncrep.Error``."""
        if self._c:
            lib.sr_client_close(self._c)
        self._c = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_c", None):
            self.close()

    def _handle(self):
        if not self._c:
            raise invalid("the client is closed")
        return self._c

    def _check(self, rc, what):
        if rc < 0:
            msg = lib.sr_client_error(self._c).decode(errors="replace") if self._c else ""
            raise from_code(rc, "%s: %s" % (what, msg) if msg else what)
        return rc

    # ---- the model ---------------------------------------------------------

    def declare(self, name, initial=None, trainable=True, dtype=None, shape=None):
        """Declare variable ``name``: its dtype and shape from ``initial`` (a
        numpy array; the chief's value initialises an empty store), or from
        ``dtype`` and ``shape`` for a worker that has no value to give.
        Integer variables are never trainable."""
        nb = _name_bytes(name)
        if initial is not None:
            initial = np.asarray(initial)
            if not initial.flags.c_contiguous:  # one copy, at declaration only
                initial = initial.copy(order="C")
            dtype, shape = initial.dtype, initial.shape
        elif dtype is None or shape is None:
            raise invalid("declare %s: give an initial array, or dtype and shape" % name)
        code = _dtype_code(dtype, "declare %s" % name)
        shape = tuple(shape)
        if len(shape) > 8 or any(not isinstance(d, (int, np.integer)) or d < 0 for d in shape):
            raise invalid("declare %s: shape %r (at most 8 dimensions, each >= 0)" % (name, shape))
        trainable = bool(trainable) and code in (_lib.FLOAT32, _lib.FLOAT64)
        dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        data = initial.ctypes.data_as(ctypes.c_void_p) if initial is not None else None
        self._check(lib.sr_client_declare_ex(self._handle(), nb, code, len(shape), dims, data,
                                              0 if trainable else _NOT_TRAINABLE),
                    "declare %s" % name)
        self._vars[name] = _Var(dtype, shape, trainable)

    def declare_model(self, tensors, frozen=(), sparse=()):
        """Declare a whole model (the model API, issue 23): ``tensors`` is an
        ordered iterable of ``(name, array)`` pairs (the chief's arrays are the
        initial values; another worker's give dtype and shape).  Names in
        ``frozen`` are not trainable; names in ``sparse`` stay variables of
        their own, pushed with ``push_sparse`` before ``model_step``.  The
        coordinator keeps the others in a few large packs, so one
        ``model_step`` per round costs what the model's bytes cost.  Later
        model calls take lists in this order."""
        if self._model is not None:
            raise invalid("declare_model: this client has declared its model")
        items = [(n, np.ascontiguousarray(a)) for n, a in tensors]
        frozen, sparse = set(frozen), set(sparse)
        names = [n for n, _ in items]
        for n in frozen | sparse:
            if n not in names:
                raise invalid("declare_model: %s is not one of the model's tensors" % n)
        specs = (_lib.TensorSpec * max(1, len(items)))()
        keep = []
        for i, (n, a) in enumerate(items):
            code = _dtype_code(a.dtype, "declare_model %s" % n)
            if a.ndim > 8:
                raise invalid("declare_model %s: %d dimensions, at most 8" % (n, a.ndim))
            dims = (ctypes.c_int64 * max(1, a.ndim))(*a.shape)
            nb = _name_bytes(n)
            keep += [dims, nb, a]
            flags = (_lib.DECLARE_NOT_TRAINABLE if n in frozen else 0) | \
                (_lib.DECLARE_SPARSE if n in sparse else 0)
            specs[i] = _lib.TensorSpec(nb, code, a.ndim, dims, a.ctypes.data, flags)
        self._check(lib.sr_client_declare_model(self._handle(), len(items), specs),
                    "declare_model")
        for n, a in items:
            trainable = n not in frozen and a.dtype in (np.float32, np.float64)
            self._vars[n] = _Var(a.dtype, a.shape, trainable)
        self._model = [(n, self._vars[n]) for n, _ in items]

    def _model_arrays(self, arrs, what, out):
        if self._model is None:
            raise invalid("%s: no model declared (declare_model)" % what)
        if arrs is None:
            return [None] * len(self._model)
        arrs = list(arrs)
        if len(arrs) != len(self._model):
            raise invalid("%s: %d arrays for a model of %d tensors" % (what, len(arrs),
                                                                        len(self._model)))
        res = []
        for (n, v), a in zip(self._model, arrs):
            if a is None:
                res.append(None)
                continue
            if not isinstance(a, np.ndarray) or a.dtype != v.dtype or a.shape != v.shape or \
                    not a.flags.c_contiguous or (out and not a.flags.writeable):
                raise invalid("%s %s: a %s C-contiguous%s array of %s%s" %
                              (what, n, "writable" if out else "", "", v.dtype, list(v.shape)))
            res.append(a)
        return res

    @staticmethod
    def _pointers(arrs):
        return (ctypes.c_void_p * max(1, len(arrs)))(
            *[a.ctypes.data if a is not None else None for a in arrs])

    def model_pull(self, outs=None):
        """Every tensor's current value, in the declared order: new arrays, or
        written into ``outs`` (which are returned)."""
        if self._model is None:
            raise invalid("model_pull: no model declared (declare_model)")
        if outs is None:
            outs = [np.empty(v.shape, v.dtype) for _, v in self._model]
        outs = self._model_arrays(outs, "model_pull", True)
        self._check(lib.sr_client_model_pull(self._handle(), self._pointers(outs)), "model_pull")
        return outs

    def model_step(self, grads, outs=None):
        """One round of the whole model: push ``grads`` (in the declared
        order; None for a tensor without a gradient, or not trainable), take
        the step's token, and write the fresh values into ``outs`` (None
        entries are skipped).  Raises as ``step()`` does (``syncrep.Done``
        when the job has ended)."""
        return self._model_step_at(self._model_pointers(grads, "model_step", False),
                                   self._model_pointers(outs, "model_step", True))

    def _model_pointers(self, arrs, what, out):
        """The C call's array of addresses of ``arrs``, checked as
        ``model_step`` checks them (``out``: to be written)."""
        return self._pointers(self._model_arrays(arrs, what, out))

    def _model_step_at(self, grads_p, values_p):
        """``model_step`` with address arrays from ``_model_pointers``, or
        kept valid by the caller (syncrep.torch reuses them every round, so
        a round of many tensors costs no per-tensor Python work)."""
        self._check(lib.sr_client_model_step(self._handle(), grads_p, values_p), "model_step")
        return self.local_step

    def ready(self):
        """The chief marks the model ready; the other workers wait for that."""
        self._check(lib.sr_client_ready(self._handle()), "ready")

    def finish(self):
        """The chief ends the job at the current global step: the others'
        ``step()`` then raises ``syncrep.Done``, as at the coordinator's
        ``--max-steps``."""
        self._check(lib.sr_client_finish(self._handle()), "finish")

    def _var(self, name, what):
        v = self._vars.get(name)
        if v is None:
            raise invalid("%s %s: not declared by this client (declare it first)" % (what, name))
        return v

    def _out(self, name, v, out):
        if out is None:
            return np.empty(v.shape, v.dtype)
        if not isinstance(out, np.ndarray):
            raise invalid("pull %s: out must be a numpy array" % name)
        if out.dtype != v.dtype or out.shape != v.shape:
            raise invalid("pull %s: out is %s%s, the variable is %s%s" %
                          (name, out.dtype, list(out.shape), v.dtype, list(v.shape)))
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise invalid("pull %s: out must be a writable C-contiguous array" % name)
        return out

    def pull(self, name, out=None):
        """The variable's current value: a new numpy array, or written into
        ``out`` (of its dtype and shape), which is returned."""
        v = self._var(name, "pull")
        out = self._out(name, v, out)
        self._check(lib.sr_client_pull(self._handle(), _name_bytes(name),
                                       out.ctypes.data_as(ctypes.c_void_p), v.nbytes),
                    "pull %s" % name)
        return out

    def pull_many(self, names, outs=None):
        """Several variables in one call (their requests travel together);
        a list of arrays, new or the given ``outs``."""
        names = list(names)
        outs = list(outs) if outs is not None else [None] * len(names)
        if len(outs) != len(names):
            raise invalid("pull_many: %d names, %d outs" % (len(names), len(outs)))
        arrs = [self._out(n, self._var(n, "pull"), o) for n, o in zip(names, outs)]
        k = len(names)
        nb = (ctypes.c_char_p * k)(*[_name_bytes(n) for n in names])
        dst = (ctypes.c_void_p * k)(*[a.ctypes.data for a in arrs])
        sz = (ctypes.c_size_t * k)(*[a.nbytes for a in arrs])
        self._check(lib.sr_client_pull_many(self._handle(), k, nb, dst, sz), "pull_many")
        return arrs

    def _grad(self, name, grad, what):
        v = self._var(name, what)
        if not v.trainable:
            raise invalid("%s %s: the variable is not trainable" % (what, name))
        if not isinstance(grad, np.ndarray):
            raise invalid("%s %s: the gradient must be a numpy array" % (what, name))
        if grad.dtype != v.dtype or grad.shape != v.shape:
            raise invalid("%s %s: gradient is %s%s, the variable is %s%s" %
                          (what, name, grad.dtype, list(grad.shape), v.dtype, list(v.shape)))
        if not grad.flags.c_contiguous:
            raise invalid("%s %s: the gradient must be C-contiguous (np.ascontiguousarray)" %
                          (what, name))
        return grad

    def push(self, name, grad):
        """Push a dense gradient (the variable's dtype and shape).  Small
        pushes are pipelined: the coordinator's answer (accepted, stale,
        duplicate: see ``stats()``) is taken by the next ``step()``.  The
        array must not change until then; libsyncrep copies what it sends."""
        g = self._grad(name, grad, "push")
        self._check(lib.sr_client_push(self._handle(), _name_bytes(name),
                                       g.ctypes.data_as(ctypes.c_void_p), g.nbytes),
                    "push %s" % name)

    def push_many(self, items):
        """Push several dense gradients: a dict or a list of (name, grad)."""
        items = list(items.items()) if isinstance(items, dict) else list(items)
        grads = [self._grad(n, g, "push") for n, g in items]
        k = len(items)
        nb = (ctypes.c_char_p * k)(*[_name_bytes(n) for n, _ in items])
        src = (ctypes.c_void_p * k)(*[g.ctypes.data for g in grads])
        sz = (ctypes.c_size_t * k)(*[g.nbytes for g in grads])
        self._check(lib.sr_client_push_many(self._handle(), k, nb, src, sz), "push_many")

    def push_sparse(self, name, indices, rows):
        """Push a sparse gradient: int64 row ``indices`` (any order, repeats
        summed) and ``rows`` of shape (len(indices),) + the variable's row
        shape."""
        v = self._var(name, "push_sparse")
        if not v.trainable or len(v.shape) < 1:
            raise invalid("push_sparse %s: the variable is %s" %
                          (name, "not trainable" if not v.trainable else "a scalar"))
        if not isinstance(indices, np.ndarray) or indices.dtype != np.int64 or indices.ndim != 1:
            raise invalid("push_sparse %s: indices must be a 1-D int64 array" % name)
        if not isinstance(rows, np.ndarray) or rows.dtype != v.dtype or \
                rows.shape != (len(indices),) + v.shape[1:]:
            raise invalid("push_sparse %s: rows must be %s%s, not %s%s" %
                          (name, v.dtype, [len(indices)] + list(v.shape[1:]),
                           getattr(rows, "dtype", type(rows).__name__),
                           list(getattr(rows, "shape", ()))))
        if not indices.flags.c_contiguous or not rows.flags.c_contiguous:
            raise invalid("push_sparse %s: indices and rows must be C-contiguous" % name)
        self._check(lib.sr_client_push_sparse(self._handle(), _name_bytes(name), len(indices),
                                              indices.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)),
                                              rows.ctypes.data_as(ctypes.c_void_p), rows.nbytes),
                    "push_sparse %s" % name)

    # ---- steps -------------------------------------------------------------

    def flush(self):
        """Wait until every push so far is answered (raises a refusal)."""
        self._check(lib.sr_client_flush(self._handle()), "flush")

    def step(self):
        """Take a step token (the barrier between steps); returns its value,
        the new ``local_step``."""
        self._check(lib.sr_client_step(self._handle()), "step")
        return self.local_step

    def push_step(self, name, grad):
        """``push(name, grad)`` then ``step()``, in one message each way."""
        g = self._grad(name, grad, "push_step")
        self._check(lib.sr_client_push_step(self._handle(), _name_bytes(name),
                                            g.ctypes.data_as(ctypes.c_void_p), g.nbytes),
                    "push_step %s" % name)
        return self.local_step

    @property
    def local_step(self):
        """The step this worker computes at (the last token's value)."""
        return int(lib.sr_client_local_step(self._handle()))

    def global_step(self):
        """The coordinator's global step now (one round trip)."""
        g = ctypes.c_int64(-1)
        self._check(lib.sr_client_global_step(self._handle(), ctypes.byref(g)), "global_step")
        return int(g.value)

    # ---- the data cursor (issue 24; docs/python.md, Exactly-once data) ----

    def set_cursor(self, cursor):
        """Send this worker's data cursor (``bytes`` of at most 4096: the
        position after this round's samples) before the round's pushes; it
        is committed with the step this round's gradient goes into, and
        only then (one round trip)."""
        if not isinstance(cursor, (bytes, bytearray, memoryview)):
            raise invalid("set_cursor: the cursor is bytes, not %s" % type(cursor).__name__)
        b = bytes(cursor)
        if len(b) > _lib.CURSOR_MAX:
            raise invalid("set_cursor: %d bytes, at most %d" % (len(b), _lib.CURSOR_MAX))
        self._check(lib.sr_client_set_cursor(self._handle(), b, len(b)), "set_cursor")

    def cursor(self):
        """The cursor to resume from (``bytes``; ``b""`` when none was ever
        committed): of the last step this worker's gradient went into, the
        coordinator's after a restart of either."""
        buf = ctypes.create_string_buffer(_lib.CURSOR_MAX)
        n = ctypes.c_size_t(0)
        self._check(lib.sr_client_cursor(self._handle(), buf, _lib.CURSOR_MAX, ctypes.byref(n)),
                    "cursor")
        return buf.raw[:n.value]

    def stats(self):
        """What the coordinator answered to this client's pushes, and more:
        a dict of pushes, accepted, stale, duplicate, resyncs, resends,
        pulls_cached."""
        s = _lib.Stats()
        self._check(lib.sr_client_stats_get(self._handle(), ctypes.byref(s)), "stats")
        return {name: int(getattr(s, name)) for name, _ in _lib.Stats._fields_}
