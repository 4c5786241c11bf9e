"""syncrep: synchronous data-parallel training with a fault-tolerant
coordinator.  The Python client over libsyncrep (docs/python.md).

    import syncrep
    with syncrep.Client("tcp://127.0.0.1:7070", task_index=0) as c:
        c.declare("w", w0)
        c.ready()
        for batch in data:
            w = c.pull("w", out=w)
            c.push("w", gradient(w, batch))
            c.step()

    weights = syncrep.load("store.db")   # dict of numpy arrays, names as declared
"""

from . import drain
from ._lib import path as library_path
from .client import Client
from .env import place
from .data import ResumableSampler
from .drain import Drained
from .errors import Done, Error, TimeoutError
from .load import load

__all__ = ["Client", "Error", "TimeoutError", "Done", "Drained", "ResumableSampler", "drain",
           "place", "library_path", "load"]
__version__ = "0.1.0"
