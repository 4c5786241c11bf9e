"""syncrep.place / Client.from_env: a worker's place from the environment."""

import pytest

import syncrep


def test_syncrep_variables_first():
    p = syncrep.place({"SYNCREP_COORDINATOR": "tcp://h:1", "SYNCREP_TASK_INDEX": "3",
                       "RANK": "1", "SLURM_PROCID": "2"})
    assert (p.endpoint, p.task_index, p.source) == ("tcp://h:1", 3, "SYNCREP_TASK_INDEX")


@pytest.mark.parametrize("var", ["RANK", "PET_NODE_RANK", "SLURM_PROCID"])
def test_scheduler_ranks(var):
    p = syncrep.place({"SYNCREP_COORDINATOR": "ipc:///x", var: "7"})
    assert (p.task_index, p.source) == (7, var)


def test_order_torchrun_kubeflow_slurm():
    e = {"SYNCREP_COORDINATOR": "ipc:///x", "SLURM_PROCID": "2", "PET_NODE_RANK": "1"}
    assert syncrep.place(e).source == "PET_NODE_RANK"
    e["RANK"] = "0"
    assert syncrep.place(e).source == "RANK"


def test_missing_or_bad_values_name_the_variables():
    with pytest.raises(syncrep.Error, match="SYNCREP_COORDINATOR") as e:
        syncrep.place({"RANK": "0"})
    assert e.value.code == "SR_EINVAL"
    with pytest.raises(syncrep.Error, match="SYNCREP_TASK_INDEX, RANK, PET_NODE_RANK, SLURM_PROCID"):
        syncrep.place({"SYNCREP_COORDINATOR": "ipc:///x"})
    with pytest.raises(syncrep.Error, match="RANK='a'"):
        syncrep.place({"SYNCREP_COORDINATOR": "ipc:///x", "RANK": "a"})
    with pytest.raises(syncrep.Error, match="-1"):
        syncrep.place({"SYNCREP_COORDINATOR": "ipc:///x", "SYNCREP_TASK_INDEX": "-1"})


def test_keys_from_the_environment():
    p = syncrep.place({"SYNCREP_COORDINATOR": "ipc:///x", "RANK": "0",
                       "SYNCREP_SERVER_PUBLIC_KEY": "S", "SYNCREP_PUBLIC_KEY": "P",
                       "SYNCREP_SECRET_KEY": "K"})
    assert (p.server_public_key, p.public_key, p.secret_key) == ("S", "P", "K")


def test_from_env_connects(coordinator, monkeypatch):
    coord = coordinator("--replicas-to-aggregate", "1", "--learning-rate", "1.0")
    monkeypatch.setenv("SYNCREP_COORDINATOR", coord.endpoint)
    monkeypatch.delenv("SYNCREP_TASK_INDEX", raising=False)
    monkeypatch.setenv("SLURM_PROCID", "0")
    with syncrep.Client.from_env(timeout=10.0) as c:
        assert c.task_index == 0
        assert c.global_step() == 0
    assert coord.stop() == 0
