"""SIGTERM drains (docs/python.md, SIGTERM drains).

A scheduler stops a job with SIGTERM (Slurm, Kubernetes, torchrun).  A
worker that dies mid-round loses nothing the job needs, but the round's
samples and its place in the step are wasted, and the exit status reads as a
failure.  With the drain installed, SIGTERM only sets a flag: the round in
progress finishes (its pushes, its token), and then the worker exits 0.

    syncrep.drain.install()            # SyncReplicas does this by default
    while not syncrep.drain.requested():
        ...                            # compute, push
        c.step()
    # or let SyncReplicas.step() raise syncrep.Drained (exit status 0)

Only the main thread may install a signal handler; elsewhere ``install``
returns False and SIGTERM keeps its default action.
"""

import signal
import threading

_requested = threading.Event()
_installed = set()


class Drained(SystemExit):
    """Raised by ``SyncReplicas.step()`` once the step in progress is done
    after a SIGTERM: a ``SystemExit`` with status 0, so an uncaught one ends
    the process with 0 after ``with`` blocks and ``finally`` clauses ran."""

    def __init__(self, signum=signal.SIGTERM):
        super().__init__(0)
        self.signum = signum


def _handler(signum, frame):  # noqa: ARG001 (the signal module's signature)
    _requested.set()


def install(signals=(signal.SIGTERM,)):
    """Make each of ``signals`` (default SIGTERM) ask for a drain instead of
    ending the process.  True when installed (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    for s in signals:
        if s not in _installed:
            signal.signal(s, _handler)
            _installed.add(s)
    return True


def requested():
    """True once a drain was asked for (a signal arrived, or request())."""
    return _requested.is_set()


def request():
    """Ask for a drain from the program itself (as the signal would)."""
    _requested.set()


def reset():
    """Forget a request (tests, or a program that handled it)."""
    _requested.clear()
