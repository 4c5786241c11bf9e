"""Fixtures: a coordinator process of the test's own, on an ipc:// path in
the test's temporary folder, ended by its PID at teardown."""

import os
import signal
import subprocess
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SYNCREP_BIN = os.environ.get("SYNCREP_BIN") or os.path.join(HERE, "..", "..", "build", "cli",
                                                            "syncrep")


class Coordinator:
    def __init__(self, tmp_path, *args):
        self.dir = tmp_path
        self.store = str(tmp_path / "store.db")
        self.endpoint = "ipc://" + str(tmp_path / "coord.sock")
        self.log_path = str(tmp_path / "coordinator.log")
        self.args = list(args)
        self.proc = None

    def start(self):
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([SYNCREP_BIN, "coordinator", "--store", self.store, "--bind",
                                      self.endpoint, "--log-level", "debug"] + self.args,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        return self

    def kill9(self):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None
            self.log.close()

    def stop(self):
        """SIGTERM and wait; the exit status."""
        if self.proc is None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(20)
        self.proc = None
        self.log.close()
        return rc

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")


@pytest.fixture
def coordinator(tmp_path):
    """A factory: coordinator(*options) starts one; all are ended at teardown."""
    started = []

    def make(*args):
        c = Coordinator(tmp_path / ("c%d" % len(started)), *args)
        c.dir.mkdir()
        started.append(c)
        return c.start()

    yield make
    for c in started:
        c.kill9()


def wait_until(pred, timeout=15.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return False
