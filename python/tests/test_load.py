"""syncrep.load and syncrep.torch.load_into: a small model trained through a
coordinator (momentum, so the store holds slots), then the store, its npz
and its safetensors export read back: the same arrays, and a fresh module
loaded from each holds the trained weights."""

import os
import subprocess

import numpy as np
import pytest

import syncrep
from conftest import SYNCREP_BIN

torch = pytest.importorskip("torch")

from syncrep.torch import SyncReplicas, load_into  # noqa: E402

STEPS = 4


class Net(torch.nn.Module):
    def __init__(self, seed=1):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.lin = torch.nn.Linear(3, 2)
        self.wide = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
        self.register_buffer("seen", torch.zeros(1))  # not trained: load_into leaves it
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))

    def forward(self, x):
        return self.lin(x) + self.wide.float()


def train(coord):
    model = Net()
    with syncrep.Client(coord.endpoint, task_index=0, timeout=20.0) as c:
        sync = SyncReplicas(model, c)
        for step in range(STEPS):
            g = torch.Generator().manual_seed(step)
            x, y = torch.randn(4, 3, generator=g), torch.randn(4, 2, generator=g)
            model.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            sync.step()
    return {n: p.detach().clone() for n, p in model.named_parameters()}


@pytest.fixture
def trained(coordinator):
    coord = coordinator("--replicas-to-aggregate", "1", "--learning-rate", "0.1",
                        "--optimizer", "momentum", "--init-tokens", "0")
    want = train(coord)
    assert coord.stop() == 0
    # SyncReplicas declares its model with the model API (packs in the
    # store); the export names each tensor, never a pack.
    packs = [n for n in syncrep.load(coord.store) if n.startswith("syncrep:pack/")]
    assert packs == []
    return coord, want


def test_load_store_npz_safetensors_equal_and_load_into(trained, monkeypatch):
    coord, want = trained
    monkeypatch.setenv("SYNCREP_BIN", SYNCREP_BIN)
    arrays = syncrep.load(coord.store)
    names = {"lin.weight", "lin.bias", "wide"}
    assert names <= set(arrays)
    assert {n + "/momentum" for n in names} <= set(arrays)
    for n in names:
        np.testing.assert_array_equal(arrays[n], want[n].numpy())
    assert arrays["wide"].dtype == np.float64 and arrays["lin.weight"].dtype == np.float32

    npz = str(coord.dir / "w.npz")
    sft = str(coord.dir / "w.safetensors")
    for fmt, out in (("npz", npz), ("safetensors", sft)):
        subprocess.run([SYNCREP_BIN, "store", "export", coord.store, out, "--format", fmt],
                       check=True, stdout=subprocess.DEVNULL)
        got = syncrep.load(out)
        assert sorted(got) == sorted(arrays), fmt
        for n in arrays:
            assert got[n].dtype == arrays[n].dtype and got[n].shape == arrays[n].shape, (fmt, n)
            np.testing.assert_array_equal(got[n], arrays[n], err_msg=fmt + " " + n)
    from syncrep.load import safetensors_metadata
    step = int(safetensors_metadata(sft)["global_step"])
    assert step >= STEPS
    assert syncrep.load(sft, step=step).keys() == arrays.keys()
    with pytest.raises(syncrep.Error):
        syncrep.load(npz, step=0)

    for src in (coord.store, npz, sft):
        fresh = Net(seed=7)
        assert load_into(fresh, src) == ([], [])
        for n, p in fresh.named_parameters():
            torch.testing.assert_close(p.detach(), want[n], rtol=0, atol=0)
        assert fresh.seen.item() == 0.0


def test_load_older_step_and_refusals(trained, monkeypatch):
    coord, want = trained
    monkeypatch.setenv("SYNCREP_BIN", SYNCREP_BIN)
    latest = syncrep.load(coord.store)
    older = syncrep.load(coord.store, step=STEPS - 1)
    assert older.keys() == latest.keys()
    assert not np.array_equal(older["lin.weight"], latest["lin.weight"])
    with pytest.raises(syncrep.Error, match="not retained") as e:
        syncrep.load(coord.store, step=10 ** 6)
    assert e.value.code == "SR_ENOENT"
    with pytest.raises(FileNotFoundError):
        syncrep.load(str(coord.dir / "nothing.db"))

    class Other(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

    with pytest.raises(syncrep.Error, match="not in the module: wide"):
        load_into(Other(), coord.store)
    m = Other()
    assert load_into(m, coord.store, strict=False) == ([], ["wide"])
    torch.testing.assert_close(m.lin.weight.detach(), want["lin.weight"], rtol=0, atol=0)
    with pytest.raises(syncrep.Error, match="lin.weight: \\(2, 3\\) in the file"):
        bad = torch.nn.Module()
        bad.lin = torch.nn.Linear(2, 2)
        load_into(bad, coord.store, strict=False)
    assert os.path.exists(coord.store)
