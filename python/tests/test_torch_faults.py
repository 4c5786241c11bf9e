"""syncrep.torch under faults (issue 24), with worker processes:
- a job whose coordinator and a worker are SIGKILLed and restarted ends with
  parameters bit-identical to the same job without faults
  (--deterministic-sum; ResumableSampler gives every committed step the
  same batches);
- SIGTERM drains: the worker finishes its round (the push counts) and
  exits 0."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")

import syncrep  # noqa: E402
from syncrep.torch import SyncReplicas  # noqa: E402

from conftest import wait_until  # noqa: E402
from torch_worker import make_model  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ARGS = ("--replicas-to-aggregate", "2", "--learning-rate", "0.05", "--optimizer", "momentum",
        "--deterministic-sum")


class Worker:
    def __init__(self, coord, task, tasks, epochs, delay):
        self.path = str(coord.dir / ("worker%d.log" % task))
        self.args = [sys.executable, os.path.join(HERE, "torch_worker.py"), coord.endpoint,
                     str(task), str(tasks), str(epochs), str(delay)]

    def start(self):
        self.log = open(self.path, "ab")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)
        return self

    def text(self):
        with open(self.path, "rb") as f:
            return f.read().decode(errors="replace")

    def rounds(self):
        return self.text().count("round ")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.log.close()

    def wait(self):
        rc = self.proc.wait(150)
        self.log.close()
        return rc


def run(coordinator, faults):
    coord = coordinator(*ARGS)
    ws = [Worker(coord, t, 2, 2, 0.03).start() for t in (0, 1)]
    if faults:
        assert wait_until(lambda: ws[0].rounds() >= 6, 90), ws[0].text()
        coord.kill9()
        coord.start()
        assert wait_until(lambda: ws[1].rounds() >= 14, 90), ws[1].text()
        ws[1].kill9()
        ws[1] = Worker(coord, 1, 2, 2, 0.03).start()
    rcs = [w.wait() for w in ws]
    assert rcs == [0, 0], [w.text() for w in ws]
    # The final parameters by name, as a new worker of the job loads them.
    model = make_model()
    with syncrep.Client(coord.endpoint, task_index=0, timeout=20.0) as c:
        SyncReplicas(model, c, drain_on_sigterm=False)
    params = {n: p.detach().numpy().copy() for n, p in model.named_parameters()}
    assert coord.stop() == 0
    return params, syncrep.load(coord.store), coord


def test_faults_leave_parameters_bit_identical(coordinator):
    clean, clean_store, _ = run(coordinator, False)
    faulty, faulty_store, coord = run(coordinator, True)
    assert "incarnation=2" in coord.log_text()
    assert sorted(clean) == sorted(faulty) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    for name in clean:
        assert clean[name].tobytes() == faulty[name].tobytes(), name
    assert clean["0.weight"].size == 40
    assert not np.array_equal(clean["0.weight"], make_model()[0].weight.detach().numpy())
    # Everything the store holds (the momentum slots too), bit for bit.
    assert sorted(clean_store) == sorted(faulty_store)
    for name in clean_store:
        assert clean_store[name].tobytes() == faulty_store[name].tobytes(), name


def test_sigterm_drains_and_exits_zero(coordinator):
    coord = coordinator("--replicas-to-aggregate", "1", "--learning-rate", "0.05")
    w = Worker(coord, 0, 1, 1000, 0.03).start()
    assert wait_until(lambda: w.rounds() >= 3, 60), w.text()
    w.proc.send_signal(signal.SIGTERM)
    assert w.wait() == 0, w.text()
    out = w.text()
    assert "drained" in out and "Traceback" not in out, out
    drained = int(out.split("drained ")[1].split()[0])
    with syncrep.Client(coord.endpoint, task_index=0, timeout=20.0) as c:
        # The round in progress at the signal counted: the global step is
        # the worker's last local step (one step per round, R = 1).
        assert c.global_step() == drained
    assert coord.stop() == 0
