"""Finding and describing libsyncrep for ctypes.

The library is looked for, in order: the path in ``SYNCREP_LIBRARY``; the
folder ``cmake --install`` recorded in ``_config.py`` (absent in the source
tree); the dynamic loader's own search (``libsyncrep.so.0`` on
``LD_LIBRARY_PATH``, the loader cache); the default build folder of a source
checkout (``build/worker/libsyncrep.so`` beside ``python/``).
"""

import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))

FLOAT32, FLOAT64, INT32, INT64 = 1, 2, 3, 4

# Issue 27 (docs/network.md): heartbeats, connect timeout, TCP keepalive,
# the last six fields of sr_client_options (0 = the default, -1 = off);
# also syncrep.Client's keyword arguments of the same names.
NETWORK_OPTIONS = ("heartbeat_ivl_ms", "heartbeat_timeout_ms", "connect_timeout_ms",
                   "tcp_keepalive_idle_s", "tcp_keepalive_intvl_s", "tcp_keepalive_cnt")


class Options(ctypes.Structure):
    """``sr_client_options`` (include/syncrep/syncrep.h)."""

    _fields_ = [
        ("endpoint", ctypes.c_char_p),
        ("task_index", ctypes.c_int),
        ("timeout_ms", ctypes.c_int),
        ("server_public_key", ctypes.c_char_p),
        ("public_key", ctypes.c_char_p),
        ("secret_key", ctypes.c_char_p),
    ] + [(name, ctypes.c_int) for name in NETWORK_OPTIONS]
    # They must be here even when unused: the library reads the whole C struct.


class TensorSpec(ctypes.Structure):
    """``sr_tensor_spec`` (include/syncrep/syncrep.h, the model API)."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("initial_value", ctypes.c_void_p),
        ("flags", ctypes.c_uint),
    ]


DECLARE_NOT_TRAINABLE, DECLARE_SPARSE = 0x1, 0x8


class Stats(ctypes.Structure):
    """``sr_client_stats``."""

    _fields_ = [
        (name, ctypes.c_uint64)
        for name in ("pushes", "accepted", "stale", "duplicate", "resyncs", "resends",
                     "pulls_cached")
    ]


def _candidates():
    env = os.environ.get("SYNCREP_LIBRARY")
    if env:
        yield env
        return
    try:
        from . import _config  # written by cmake --install

        yield os.path.join(_config.LIBDIR, "libsyncrep.so.0")
    except ImportError:
        pass
    yield "libsyncrep.so.0"
    yield os.path.join(_HERE, "..", "..", "build", "worker", "libsyncrep.so")


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("syncrep: libsyncrep not found; set SYNCREP_LIBRARY=/path/libsyncrep.so. "
                      "Tried: " + "; ".join(tried))


lib, path = _load()

_p = ctypes.c_void_p
_sz = ctypes.c_size_t
_signatures = {
    "sr_client_open": (ctypes.c_int, [ctypes.POINTER(_p), ctypes.POINTER(Options)]),
    "sr_client_close": (None, [_p]),
    "sr_client_error": (ctypes.c_char_p, [_p]),
    "sr_client_declare_ex": (ctypes.c_int, [_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                            ctypes.POINTER(ctypes.c_int64), _p, ctypes.c_int]),
    "sr_client_ready": (ctypes.c_int, [_p]),
    "sr_client_finish": (ctypes.c_int, [_p]),
    "sr_client_pull": (ctypes.c_int, [_p, ctypes.c_char_p, _p, _sz]),
    "sr_client_pull_many": (ctypes.c_int, [_p, _sz, ctypes.POINTER(ctypes.c_char_p),
                                           ctypes.POINTER(_p), ctypes.POINTER(_sz)]),
    "sr_client_push": (ctypes.c_int, [_p, ctypes.c_char_p, _p, _sz]),
    "sr_client_push_many": (ctypes.c_int, [_p, _sz, ctypes.POINTER(ctypes.c_char_p),
                                           ctypes.POINTER(_p), ctypes.POINTER(_sz)]),
    "sr_client_push_sparse": (ctypes.c_int, [_p, ctypes.c_char_p, _sz,
                                             ctypes.POINTER(ctypes.c_int64), _p, _sz]),
    "sr_client_push_step": (ctypes.c_int, [_p, ctypes.c_char_p, _p, _sz]),
    "sr_client_flush": (ctypes.c_int, [_p]),
    "sr_client_step": (ctypes.c_int, [_p]),
    "sr_client_local_step": (ctypes.c_int64, [_p]),
    "sr_client_global_step": (ctypes.c_int, [_p, ctypes.POINTER(ctypes.c_int64)]),
    "sr_client_stats_get": (ctypes.c_int, [_p, ctypes.POINTER(Stats)]),
    "sr_errname": (ctypes.c_char_p, [ctypes.c_int]),
    "sr_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "sr_errdetail": (ctypes.c_char_p, []),
    # issue 23: the model as the unit of a step
    "sr_client_declare_model": (ctypes.c_int, [_p, _sz, ctypes.POINTER(TensorSpec)]),
    "sr_client_model_pull": (ctypes.c_int, [_p, ctypes.POINTER(_p)]),
    "sr_client_model_step": (ctypes.c_int, [_p, ctypes.POINTER(_p), ctypes.POINTER(_p)]),
    # issue 24: cursor
    "sr_client_set_cursor": (ctypes.c_int, [_p, ctypes.c_char_p, _sz]),
    "sr_client_cursor": (ctypes.c_int, [_p, ctypes.c_char_p, _sz, ctypes.POINTER(_sz)]),
}

CURSOR_MAX = 4096  # SR_CURSOR_MAX
for _name, (_res, _args) in _signatures.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args
