"""syncrep.Client against a real coordinator: the seed's two scenarios with
their exact numbers (TensorFlow's SyncReplicasOptimizerV2 test, as
tests/integration/seed_test.c), errors as exceptions, stats."""

import threading

import numpy as np
import pytest

import syncrep

F32 = np.float32


def workers(coord, n):
    """n clients, tasks 0..n-1, the seed's model declared, ready."""
    cs = []
    for i in range(n):
        c = syncrep.Client(coord.endpoint, task_index=i, timeout=20.0)
        if i == 0:
            c.declare("v0", np.array(0.0, F32))
            c.declare("v1", np.array(1.0, F32))
            c.declare("v_sparse", np.array([[3.0], [4.0]], F32))
        else:
            c.declare("v0", dtype=F32, shape=())
            c.declare("v1", dtype=F32, shape=())
            c.declare("v_sparse", dtype=F32, shape=(2, 1))
        cs.append(c)
    for c in cs:
        c.ready()
    return cs


def train(c, i, pushed=None):
    """One train_op of the seed: push the three gradients, take a token."""
    c.push("v0", np.array(0.1 + 0.2 * i, F32))
    c.push("v1", np.array(0.9 + 0.2 * i, F32))
    c.push_sparse("v_sparse", np.array([1], np.int64), np.array([[0.1 + 0.2 * i]], F32))
    if pushed is not None:
        pushed.set()
    return c.step()


def seed_start(coordinator, n):
    return coordinator("--replicas-to-aggregate", "2", "--total-replicas", str(n),
                       "--init-tokens", str(n), "--learning-rate", "2.0")


def test_seed_two_workers(coordinator):
    coord = seed_start(coordinator, 2)
    w = workers(coord, 2)
    assert w[0].pull("v0") == F32(0.0) and w[0].pull("v1") == F32(1.0)
    assert w[1].global_step() == 0 and w[1].local_step == 0
    vs = np.zeros((2, 1), F32)
    assert w[1].pull("v_sparse", out=vs) is vs
    assert vs.tolist() == [[3.0], [4.0]]

    train(w[0], 0)  # the init tokens let the workers run one after the other
    train(w[1], 1)
    assert w[1].global_step() == 1
    assert w[1].pull("v0") == pytest.approx(0 - (0.1 + 0.3) / 2 * 2.0, abs=1e-6)
    assert w[1].pull("v1") == pytest.approx(1 - (0.9 + 1.1) / 2 * 2.0, abs=1e-6)
    np.testing.assert_allclose(w[1].pull("v_sparse")[:, 0], [3.0, 4.0 - (0.1 + 0.3) / 2 * 2.0],
                               atol=1e-6)
    assert (w[0].local_step, w[1].local_step) == (0, 0)  # the round was computed too early

    train(w[0], 0)
    train(w[1], 1)
    assert w[1].global_step() == 1
    assert (w[0].local_step, w[1].local_step) == (1, 1)

    # The queue is empty: the two workers must work together.
    ts = [threading.Thread(target=train, args=(w[i], i)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert w[1].global_step() == 2
    assert w[1].pull("v0") == pytest.approx(0 - 2 * (0.1 + 0.3) / 2 * 2.0, abs=1e-6)
    assert w[1].pull("v1") == pytest.approx(1 - 2 * (0.9 + 1.1) / 2 * 2.0, abs=1e-6)
    s = w[0].stats()
    assert (s["accepted"], s["stale"], s["duplicate"]) == (6, 3, 0)
    for c in w:
        c.close()
    assert coord.stop() == 0


def test_seed_three_workers_one_backup(coordinator):
    coord = seed_start(coordinator, 3)
    w = workers(coord, 3)
    train(w[0], 0)  # workers 0 and 2 finish first: their average is applied
    train(w[2], 2)
    assert w[1].global_step() == 1
    assert w[1].pull("v0") == pytest.approx(0 - (0.1 + 0.5) / 2 * 2.0, abs=1e-6)
    assert w[1].pull("v1") == pytest.approx(1 - (0.9 + 1.3) / 2 * 2.0, abs=1e-6)
    train(w[1], 1)  # late: stale, dropped
    s = w[1].stats()
    assert (s["stale"], s["accepted"]) == (3, 0)
    for i in range(3):  # local steps are still 0: dropped too
        train(w[i], i)
    assert w[1].global_step() == 1 and w[1].local_step == 1

    pushed = threading.Event()
    t0 = threading.Thread(target=train, args=(w[0], 0, pushed))
    t0.start()
    assert pushed.wait(20)
    assert w[1].global_step() == 1  # worker 0 alone cannot finish the step
    train(w[1], 1)
    t0.join(30)
    assert w[1].global_step() == 2
    assert w[1].pull("v0") == pytest.approx(-0.6 - (0.1 + 0.3) / 2 * 2.0, abs=1e-6)
    assert w[1].pull("v1") == pytest.approx(-1.2 - (0.9 + 1.1) / 2 * 2.0, abs=1e-6)
    for c in w:
        c.close()
    assert coord.stop() == 0


def test_errors_are_exceptions(coordinator):
    coord = coordinator("--replicas-to-aggregate", "1", "--learning-rate", "1.0")
    with syncrep.Client(coord.endpoint, task_index=0, timeout=10.0) as c:
        c.declare("w", np.zeros((2, 3), np.float32))
        c.declare("n", np.array(7, np.int64))
        c.ready()
        # Refused in Python, before anything is sent.
        for bad in (np.zeros((2, 3), np.float64), np.zeros((3, 2), np.float32),
                    np.zeros((3, 2), np.float32).T, [[0.0] * 3] * 2):
            with pytest.raises(syncrep.Error) as e:
                c.push("w", bad)
            assert e.value.code == "SR_EINVAL"
        with pytest.raises(syncrep.Error, match="not trainable"):
            c.push("n", np.array(1, np.int64))
        with pytest.raises(syncrep.Error, match="not declared"):
            c.pull("nope")
        with pytest.raises(syncrep.Error) as e:
            c.pull("w", out=np.zeros((2, 3), np.float64))
        assert e.value.code == "SR_EINVAL"
        with pytest.raises(syncrep.Error) as e:
            c.declare("v", np.zeros(2, np.complex64))
        assert e.value.code == "SR_EINVAL"
        # Refused by the coordinator: the code and its message.
        with pytest.raises(syncrep.Error) as e:
            c.declare("w", np.zeros(4, np.float32))
        assert e.value.code == "SR_EEXIST" and "w" in str(e.value)
        with pytest.raises(syncrep.Error) as e:
            c.declare("bad\nname", np.zeros(1, np.float32))
        assert e.value.code == "SR_EINVAL" and "at byte" in str(e.value)
        g = np.ones((2, 3), np.float32)
        c.push("w", g)
        assert c.step() == 0  # the init token carries step 0
        assert c.global_step() == 1
        np.testing.assert_array_equal(c.pull("w"), -g)
        s = c.stats()
        assert set(s) == {"pushes", "accepted", "stale", "duplicate", "resyncs", "resends",
                          "pulls_cached"}
        assert s["accepted"] == 1
    with pytest.raises(syncrep.Error, match="closed"):
        c.pull("w")
    # A task index outside the job is the coordinator's refusal.
    with pytest.raises(syncrep.Error) as e:
        syncrep.Client(coord.endpoint, task_index=5, timeout=10.0)
    assert e.value.code == "SR_EINVAL" and "not a worker of this job" in str(e.value)
    assert coord.stop() == 0


def test_timeout_is_a_timeout_error(tmp_path):
    with pytest.raises(syncrep.TimeoutError) as e:
        syncrep.Client("ipc://" + str(tmp_path / "nobody.sock"), task_index=0, timeout=0.3)
    assert isinstance(e.value, syncrep.Error) and isinstance(e.value, TimeoutError)
    assert e.value.code == "SR_ETIMEDOUT"


def test_coordinator_restart_is_transparent(coordinator):
    coord = coordinator("--replicas-to-aggregate", "1", "--learning-rate", "0.5")
    c = syncrep.Client(coord.endpoint, task_index=0, timeout=20.0)
    x = np.array([100.0, 200.0])
    c.declare("x", x)
    c.ready()
    g = np.array([1.0, 2.0])
    for _ in range(6):
        c.push("x", g)
        c.step()
    before = c.global_step()
    coord.kill9()
    coord.start()
    assert c.global_step() == before  # resynchronised inside the call
    for _ in range(4):
        c.push("x", g)
        c.step()
    final = c.global_step()
    np.testing.assert_array_equal(c.pull("x"), np.array([100.0, 200.0]) - 0.5 * final * g)
    assert c.stats()["resyncs"] == 1
    c.close()
    assert coord.stop() == 0


NETWORK = ("heartbeat_ivl_ms", "heartbeat_timeout_ms", "connect_timeout_ms",
           "tcp_keepalive_idle_s", "tcp_keepalive_intvl_s", "tcp_keepalive_cnt")


def test_network_options_as_keyword_arguments(coordinator):
    """Issue 27's six client options as Client(...) keywords, spelled as
    sr_client_options' fields: values in range (and -1, off, where allowed)
    work; a value that is not an int >= -1 is refused in Python; one out of
    its range is refused by the library naming that field, which shows each
    keyword reaches its own field of the C struct."""
    coord = coordinator("--replicas-to-aggregate", "1", "--learning-rate", "0.5",
                        "--init-tokens", "0")
    with syncrep.Client(coord.endpoint, timeout=10.0, heartbeat_ivl_ms=200,
                        heartbeat_timeout_ms=3000, connect_timeout_ms=500,
                        tcp_keepalive_idle_s=30, tcp_keepalive_intvl_s=5,
                        tcp_keepalive_cnt=4) as c:
        c.declare("w", np.array([1.0], F32))
        c.ready()
        c.push("w", np.array([2.0], F32))
        assert c.step() == 1 and c.pull("w").tolist() == [0.0]
    with syncrep.Client(coord.endpoint, timeout=10.0, heartbeat_ivl_ms=-1,
                        connect_timeout_ms=-1, tcp_keepalive_idle_s=-1) as c:
        assert c.global_step() == 1
    for name in NETWORK:
        for bad in ("1000", 1.5, True, None, -2, 2 ** 31):
            with pytest.raises(syncrep.Error, match=name) as e:
                syncrep.Client(coord.endpoint, timeout=10.0, **{name: bad})
            assert e.value.code == "SR_EINVAL"
        with pytest.raises(syncrep.Error, match=name + " 10000000 is out of range") as e:
            syncrep.Client(coord.endpoint, timeout=10.0, **{name: 10 ** 7})
        assert e.value.code == "SR_EINVAL"
    with pytest.raises(TypeError, match="heartbeat_ttl_ms"):
        syncrep.Client(coord.endpoint, timeout=10.0, heartbeat_ttl_ms=1000)
    assert coord.stop() == 0
