"""Exceptions: every C error code becomes a ``syncrep.Error``."""

import builtins

from ._lib import lib


class Error(Exception):
    """A failed syncrep call.

    ``code`` is the symbolic name of the C error (``"SR_EINVAL"``), ``errno``
    its negative value, and ``str(e)`` the library's message.
    """

    def __init__(self, code, message, errno=None):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.errno = errno
        self.message = message


class TimeoutError(Error, builtins.TimeoutError):  # noqa: A001 (the issue's spelling)
    """The coordinator did not answer in time (``SR_ETIMEDOUT``)."""


class Done(Error):
    """The job has ended (``SR_EDONE``): the coordinator's ``--max-steps``
    was reached or the chief called ``finish()``."""


def from_code(rc, message):
    """The exception for C return code ``rc`` (< 0) with ``message``."""
    name = lib.sr_errname(rc).decode()
    cls = TimeoutError if name == "SR_ETIMEDOUT" else Done if name == "SR_EDONE" else Error
    return cls(name, message or lib.sr_strerror(rc).decode(), rc)


def invalid(message):
    """An argument refused in Python, before anything is sent."""
    return Error("SR_EINVAL", message, -1)
