"""``syncrep.load``: a trained model's tensors as numpy arrays.

    arrays = syncrep.load("run/store.db")            # the latest step
    arrays = syncrep.load("run/store.db", step=120)  # a retained older step
    arrays = syncrep.load("weights.npz")             # or .safetensors

A store is read through ``syncrep store export --format npz`` (every chunk's
checksum verified) into a temporary file; the command is ``$SYNCREP_BIN``,
else ``syncrep`` on ``PATH``, else the installed prefix's ``bin/syncrep``,
else a source checkout's ``build/cli/syncrep``.
The keys are the variables' names; each optimizer slot and EMA shadow is
``VAR/slot`` (``w/momentum``, ``w/adam_m``, ``w/ema``).  docs/python.md.
"""

import json
import os
import shutil
import struct
import subprocess
import tempfile

import numpy as np

from .errors import Error, invalid

_HERE = os.path.dirname(os.path.abspath(__file__))
_SAFETENSORS_DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8",
                       "F16": "<f2", "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}


def syncrep_bin():
    """The ``syncrep`` command :func:`load` runs for a store (see the module)."""
    env = os.environ.get("SYNCREP_BIN")
    if env:
        return env
    found = shutil.which("syncrep")
    if found:
        return found
    candidates = []
    try:
        from . import _config  # written by cmake --install: PREFIX/bin beside PREFIX/lib
        candidates.append(os.path.join(_config.LIBDIR, "..", "bin", "syncrep"))
    except ImportError:
        pass
    candidates.append(os.path.join(_HERE, "..", "..", "build", "cli", "syncrep"))
    for c in candidates:
        c = os.path.normpath(c)
        if os.access(c, os.X_OK):
            return c
    raise Error("SR_ENOENT", "the syncrep command was not found (set SYNCREP_BIN, put it on "
                "PATH, or build the checkout)", -11)


def _kind(path):
    """"npz", "safetensors" or "store", by the file's first bytes."""
    with open(path, "rb") as f:
        head = f.read(16)
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return "npz"
    if head.startswith(b"SQLite format 3\x00"):
        return "store"
    if path.endswith(".safetensors") or len(head) >= 9 and head[8:9] == b"{":
        return "safetensors"
    raise invalid("%s is neither a syncrep store, an .npz nor a .safetensors file" % path)


def read_safetensors(path):
    """The tensors of a .safetensors file, a dict name -> numpy array (its
    ``__metadata__``: :func:`safetensors_metadata`).  A malformed file is
    refused with ValueError."""
    with open(path, "rb") as f:
        raw = f.read()
    header, data = _safetensors_split(raw, path)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = np.dtype(_SAFETENSORS_DTYPES[info["dtype"]])
            begin, end = (int(x) for x in info["data_offsets"])
            shape = tuple(int(d) for d in info["shape"])
        except (KeyError, TypeError, ValueError):
            raise ValueError("%s: tensor %r has a malformed entry %r" % (path, name, info))
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end <= len(data) or end - begin != count * dtype.itemsize:
            raise ValueError("%s: tensor %r: offsets %r do not fit shape %r and the file"
                             % (path, name, info["data_offsets"], shape))
        out[name] = np.frombuffer(data, dtype, count, begin).reshape(shape).copy()
    return out


def _safetensors_split(raw, path):
    if len(raw) < 8:
        raise ValueError("%s: too short for a safetensors file" % path)
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise ValueError("%s: header length %d exceeds the file" % (path, n))
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError("%s: the header is not JSON: %s" % (path, e))
    if not isinstance(header, dict):
        raise ValueError("%s: the header is not a JSON object" % path)
    return header, memoryview(raw)[8 + n:]


def safetensors_metadata(path):
    """A .safetensors file's ``__metadata__`` (strings; syncrep writes
    ``global_step``)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise ValueError("%s: too short for a safetensors file" % path)
        (n,) = struct.unpack("<Q", raw)
        raw += f.read(n)
    header, _ = _safetensors_split(raw, path)
    return dict(header.get("__metadata__") or {})


def export(store, out, step=None, format="npz"):  # noqa: A002 (the CLI's word)
    """Run ``syncrep store export STORE OUT --format FORMAT [--step S]``;
    raises :class:`syncrep.Error` with the command's message on failure."""
    cmd = [syncrep_bin(), "store", "export", os.fspath(store), os.fspath(out), "--format",
           format]
    if step is not None:
        cmd += ["--step", str(int(step))]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        msg = r.stderr.decode(errors="replace").strip()
        raise Error(_code_of(msg), msg, None)
    return os.fspath(out)


def _code_of(msg):
    """The SR_ name of the error text in "syncrep store export: TEXT: detail"."""
    from ._lib import lib

    for rc in range(-1, -64, -1):
        text = lib.sr_strerror(rc).decode()
        if text != "unknown error" and (": " + text + ":") in msg:
            return lib.sr_errname(rc).decode()
    return "SR_EINVAL"


def load(path, step=None):
    """The tensors of a store (its latest step, or the retained ``step``), an
    ``.npz`` or a ``.safetensors`` file, as a dict name -> numpy array.

    For a file, ``step`` must be None or (safetensors) the step it holds."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(path)
    kind = _kind(path)
    if kind == "store":
        with tempfile.TemporaryDirectory(prefix="syncrep-load-") as d:
            out = export(path, os.path.join(d, "weights.npz"), step=step, format="npz")
            return _load_npz(out)
    if step is not None:
        held = safetensors_metadata(path).get("global_step") if kind == "safetensors" else None
        if held is None or int(held) != int(step):
            raise invalid("load(%r, step=%r): a file holds one step (%s); pass step=None"
                          % (path, step, held if held is not None else "not recorded"))
    return _load_npz(path) if kind == "npz" else read_safetensors(path)


def _load_npz(path):
    with np.load(path, allow_pickle=False) as z:
        return {name: z[name] for name in z.files}
