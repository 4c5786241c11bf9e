"""The model API from Python (issue 23): Client.declare_model, model_pull,
model_step against a real coordinator, with exact float32 values, names that
stay real (pull of one tensor), a sparse tensor beside the call, and the
refusals made in Python before anything is sent."""

import numpy as np
import pytest

import syncrep

F32 = np.float32


def model():
    return [("layer.w", np.arange(6, dtype=F32).reshape(2, 3)),
            ("layer.b", np.array([0.5, -0.5, 1.0], F32)),
            ("bn.mean", np.array([9.0, 8.0], F32)),
            ("emb", np.array([[1.0], [2.0], [3.0]], F32))]


def test_model_step_exact(coordinator):
    coord = coordinator("--replicas-to-aggregate", "1", "--learning-rate", "0.5",
                        "--init-tokens", "0")
    c = syncrep.Client(coord.endpoint, task_index=0, timeout=20.0)
    c.declare_model(model(), frozen=["bn.mean"], sparse=["emb"])
    c.ready()
    vals = c.model_pull()
    assert [v.tolist() for v in vals] == [m[1].tolist() for m in model()]
    gw = np.full((2, 3), 0.25, F32)
    gb = np.array([1.0, 2.0, 4.0], F32)
    for _ in range(3):
        c.push_sparse("emb", np.array([2], np.int64), np.array([[1.0]], F32))
        c.model_step([gw, gb, None, None], vals)
    w = model()[0][1].copy()
    b = model()[1][1].copy()
    for _ in range(3):
        w -= F32(0.5) * gw
        b -= F32(0.5) * gb
    assert np.array_equal(vals[0], w) and np.array_equal(vals[1], b)
    assert vals[2].tolist() == [9.0, 8.0]  # not trainable: unchanged
    assert vals[3][:, 0].tolist() == [1.0, 2.0, 1.5]  # sparse rows, beside the call
    assert np.array_equal(c.pull("layer.b"), b)  # a pack's tensor, pulled by its name
    assert c.local_step == 3
    c.close()
    # syncrep.load (through `store export`) names every tensor, never a pack.
    arrays = syncrep.load(coord.store)
    assert sorted(arrays) == ["bn.mean", "emb", "layer.b", "layer.w"]
    assert arrays["layer.w"].dtype == F32 and np.array_equal(arrays["layer.w"], w)
    assert np.array_equal(arrays["layer.b"], b)
    assert arrays["bn.mean"].tolist() == [9.0, 8.0]
    assert arrays["emb"].shape == (3, 1)


def test_model_refusals(coordinator):
    coord = coordinator("--replicas-to-aggregate", "1", "--learning-rate", "0.5")
    c = syncrep.Client(coord.endpoint, task_index=0, timeout=20.0)
    with pytest.raises(syncrep.Error) as e:
        c.model_step([None])
    assert e.value.code == "SR_EINVAL"
    with pytest.raises(syncrep.Error) as e:
        c.declare_model(model(), frozen=["nope"])
    assert e.value.code == "SR_EINVAL"
    c.declare_model(model())
    c.ready()
    with pytest.raises(syncrep.Error) as e:
        c.model_step([np.zeros((3, 2), F32), None, None, None])  # a wrong shape
    assert e.value.code == "SR_EINVAL"
    with pytest.raises(syncrep.Error) as e:
        c.declare_model(model())  # twice
    assert e.value.code == "SR_EINVAL"
    c.close()
