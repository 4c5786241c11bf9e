"""Exactly-once data across restarts (issue 24): the data cursor a worker
sends with a round goes with the step that round's gradient goes into.
Two workers (separate processes) read an epoch through
syncrep.ResumableSampler; the coordinator and then a worker are killed
(SIGKILL) mid-epoch and restarted; the store's "count" variable, which each
committed step raises by one at every sample its batches used, must be 1
everywhere: no sample of the epoch skipped, none used twice."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import syncrep

from conftest import wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
SIZE, BATCH = 96, 3  # 16 rounds per worker


class Worker:
    def __init__(self, coord, task, delay):
        self.path = str(coord.dir / ("worker%d.log" % task))
        self.args = [sys.executable, os.path.join(HERE, "cursor_worker.py"), coord.endpoint,
                     str(task), str(SIZE), str(BATCH), str(delay)]
        self.proc = None

    def start(self):
        self.log = open(self.path, "ab")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)
        return self

    def rounds(self):
        with open(self.path, "rb") as f:
            return f.read().count(b"round ")

    def text(self):
        with open(self.path, "rb") as f:
            return f.read().decode(errors="replace")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.log.close()

    def wait(self):
        rc = self.proc.wait(120)
        self.log.close()
        return rc


def final_counts(coord):
    with syncrep.Client(coord.endpoint, task_index=0, timeout=20.0) as c:
        c.declare("count", None, dtype=np.float32, shape=(SIZE,))
        return c.pull("count"), c.global_step()


def test_cursor_round_trip_and_refusals(coordinator):
    coord = coordinator("--replicas-to-aggregate", "1", "--learning-rate", "1.0",
                        "--init-tokens", "0")
    with syncrep.Client(coord.endpoint, task_index=0, timeout=20.0) as c:
        c.declare("w", np.zeros(2, np.float32))
        c.ready()
        assert c.cursor() == b""  # none committed yet
        with pytest.raises(syncrep.Error) as e:
            c.set_cursor(b"x" * 4097)
        assert e.value.code == "SR_EINVAL" and "4096" in str(e.value)
        with pytest.raises(syncrep.Error):
            c.set_cursor("text")
        c.set_cursor(b"after-1")
        c.push("w", np.ones(2, np.float32))
        c.step()
        assert c.cursor() == b"after-1"
        c.set_cursor(b"after-2")  # sent, but no push of its round counted yet
        assert c.cursor() == b"after-1"
        c.push("w", np.ones(2, np.float32))
        c.step()
        assert c.cursor() == b"after-2"
    coord.kill9()
    coord.start()  # the store's: the cursor of the last step the gradient went into
    with syncrep.Client(coord.endpoint, task_index=0, timeout=20.0) as c:
        c.declare("w", np.zeros(2, np.float32))
        c.ready()
        assert c.cursor() == b"after-2"
    assert coord.stop() == 0


def test_every_sample_once_after_killing_coordinator_and_worker(coordinator):
    args = ("--replicas-to-aggregate", "2", "--learning-rate", "2.0")
    coord = coordinator(*args)
    ws = [Worker(coord, t, 0.05).start() for t in (0, 1)]
    assert wait_until(lambda: ws[1].rounds() >= 4, 60), ws[1].text()
    coord.kill9()  # mid-epoch: the step in progress is lost, its rounds redone
    coord.start()
    assert wait_until(lambda: ws[1].rounds() >= 9, 60), ws[1].text()
    ws[1].kill9()  # a worker mid-epoch: its replacement resumes from its cursor
    ws[1] = Worker(coord, 1, 0.05).start()
    rcs = [w.wait() for w in ws]
    assert rcs == [0, 0], [w.text() for w in ws]
    count, step = final_counts(coord)
    assert (count == 1.0).all(), {i: float(v) for i, v in enumerate(count) if v != 1.0}
    assert step == SIZE // (2 * BATCH)  # every committed step took one batch of each task
    assert coord.stop() == 0
