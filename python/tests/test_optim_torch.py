"""Issue 25: the coordinator's optimizers against torch.optim.

One worker (R = 1, so the averaged gradient is the gradient) pushes the same
gradients a torch.optim optimizer is given; the parameters must agree within
1e-6 relative (float32) after every combination of optimizer x weight decay
x Nesterov x learning-rate schedule x clipping (a few steps each), and after
200 steps for a representative subset (each optimizer with its richest
recipe, and torch's own StepLR, CosineAnnealingLR and LinearLR).  Sparse
rows: torch.optim.SGD on a sparse gradient and torch.optim.SparseAdam.
docs/optimizers.md says which results are bit-identical and why the others
are not (torch's CPU kernels fuse a * b + c into one FMA)."""

import itertools
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import syncrep  # noqa: E402

SHAPES = {"w": (3, 5), "b": (7,)}
BASE_LR = {"sgd": 0.05, "momentum": 0.02, "adam": 0.01, "adamw": 0.01}
L2 = 0.05         # --weight-decay for sgd, momentum, adam
ADAMW_WD = 0.01   # torch.optim.AdamW's default, and the coordinator's
CLIP = 2.0        # the gradients' norm is about 4.7: clipped most steps
W, T, LR_MIN_FACTOR, S, GAMMA = 3, 12, 0.1, 4, 0.5
RTOL = 1e-6


def initial():
    g = np.random.default_rng(7)
    return {n: g.standard_normal(s).astype(np.float32) for n, s in SHAPES.items()}


def gradients(steps, seed=11):
    g = np.random.default_rng(seed)
    return [{n: g.standard_normal(s).astype(np.float32) for n, s in SHAPES.items()}
            for _ in range(steps)]


def lr_factor(schedule, s, base, decay_steps=T, warmup=W):
    """The coordinator's schedule over the base rate (lr_schedule.h), for a
    torch LambdaLR: warm-up from 0 over W steps, then the decay."""
    if schedule == "constant":
        return 1.0
    if s < warmup:
        return s / warmup
    t = s - warmup
    if schedule == "step":
        return GAMMA ** (t // S)
    lr_min = LR_MIN_FACTOR * base
    if t >= decay_steps:
        return lr_min / base
    if schedule == "cosine":
        lr = lr_min + (base - lr_min) * (1 + math.cos(math.pi * t / decay_steps)) / 2
    else:
        lr = lr_min + (base - lr_min) * (1 - t / decay_steps)
    return lr / base


def recipe_args(opt, wd, nesterov, schedule, clip, base, decay_steps=T, warmup=W):
    args = ["--optimizer", opt, "--learning-rate", repr(base)]
    if wd:
        args += ["--weight-decay", repr(ADAMW_WD if opt == "adamw" else L2)]
    elif opt == "adamw":
        args += ["--weight-decay", "0"]
    if nesterov:
        args += ["--nesterov"]
    if schedule != "constant":
        args += ["--lr-schedule", schedule]
        if warmup:
            args += ["--warmup-steps", str(warmup)]
    if schedule == "step":
        args += ["--step-every", str(S), "--step-gamma", repr(GAMMA)]
    if schedule in ("cosine", "linear"):
        args += ["--decay-steps", str(decay_steps), "--lr-min", repr(LR_MIN_FACTOR * base)]
    if clip:
        args += ["--clip-norm", repr(CLIP)]
    return args


def run_syncrep(coordinator, args, grads, init):
    c0 = coordinator("--replicas-to-aggregate", "1", "--init-tokens", "0",
                     "--checkpoint-every-steps", "0", "--sync", "normal", *args)
    with syncrep.Client(c0.endpoint, task_index=0, timeout=20.0) as c:
        for n in SHAPES:
            c.declare(n, init[n])
        c.ready()
        for k, g in enumerate(grads):
            assert c.local_step == k
            c.push_many([(n, g[n]) for n in SHAPES])
            c.step()
        assert c.stats()["stale"] == 0
        out = {n: c.pull(n) for n in SHAPES}
    return out


def torch_optimizer(opt, wd, nesterov, params, base):
    if opt == "sgd":
        return torch.optim.SGD(params, lr=base, weight_decay=L2 if wd else 0)
    if opt == "momentum":
        return torch.optim.SGD(params, lr=base, momentum=0.9, nesterov=nesterov,
                               weight_decay=L2 if wd else 0)
    if opt == "adam":
        return torch.optim.Adam(params, lr=base, weight_decay=L2 if wd else 0)
    return torch.optim.AdamW(params, lr=base, weight_decay=ADAMW_WD if wd else 0)


def run_torch(opt, wd, nesterov, clip, grads, init, base, scheduler):
    params = [torch.tensor(init[n], requires_grad=True) for n in SHAPES]
    o = torch_optimizer(opt, wd, nesterov, params, base)
    sched = scheduler(o)
    for g in grads:
        for p, n in zip(params, SHAPES):
            p.grad = torch.tensor(g[n])
        if clip:
            torch.nn.utils.clip_grad_norm_(params, CLIP)
        o.step()
        if sched is not None:
            sched.step()
    return {n: p.detach().numpy() for p, n in zip(params, SHAPES)}


def lambda_scheduler(schedule, base, **kw):
    if schedule == "constant":
        return lambda o: None
    return lambda o: torch.optim.lr_scheduler.LambdaLR(
        o, lambda s: lr_factor(schedule, s, base, **kw))


def assert_close(ours, ref):
    for n in SHAPES:
        np.testing.assert_allclose(ours[n], ref[n], rtol=RTOL, atol=RTOL, err_msg=n)


# torch's CPU kernels fuse add(x, alpha=a) into an FMA when they run AVX2 code;
# the coordinator's kernels do the same where the CPU has AVX2 and FMA
# (optim.c).  Then every combination without clipping is bit-identical.
# Clipping is not: torch sums the norm in float32 in its own order, the
# coordinator in double.
SAME_KERNELS = ("CPU capability usage: AVX2" in torch.__config__.show()
                and "ATEN_CPU_CAPABILITY" not in __import__("os").environ)


def assert_bits(ours, ref):
    for n in SHAPES:
        assert np.array_equal(ours[n], ref[n]), \
            "%s: not bit-identical, max |diff| %g" % (n, np.max(np.abs(ours[n] - ref[n])))


COMBOS = [(o, wd, nest, sch, clip)
          for o, wd, nest, sch, clip in itertools.product(
              ["sgd", "momentum", "adam", "adamw"], [0, 1], [0, 1],
              ["constant", "step", "cosine", "linear"], [0, 1])
          if not nest or o == "momentum"]


@pytest.mark.parametrize("opt,wd,nesterov,schedule,clip", COMBOS,
                         ids=["%s-wd%d-nest%d-%s-clip%d" % c for c in COMBOS])
def test_every_combination_matches_torch(coordinator, opt, wd, nesterov, schedule, clip):
    """Every combination, over W + T + 3 steps: warm-up, decay, the floor."""
    grads, init, base = gradients(W + T + 3), initial(), BASE_LR[opt]
    ours = run_syncrep(coordinator, recipe_args(opt, wd, nesterov, schedule, clip, base), grads,
                       init)
    ref = run_torch(opt, wd, nesterov, clip, grads, init, base, lambda_scheduler(schedule, base))
    assert_close(ours, ref)
    if SAME_KERNELS and not clip:
        assert_bits(ours, ref)


LONG = [
    # each optimizer's richest recipe, with the coordinator's warm-up
    ("sgd", 1, 0, "cosine", 1, None),
    ("momentum", 1, 1, "step", 1, None),
    ("adam", 1, 0, "linear", 1, None),
    ("adamw", 1, 0, "cosine", 1, None),
    # torch's own schedulers (no warm-up)
    ("momentum", 0, 0, "step", 0, "StepLR"),
    ("adamw", 1, 0, "cosine", 1, "CosineAnnealingLR"),
    ("sgd", 1, 0, "linear", 0, "LinearLR"),
]


@pytest.mark.parametrize("opt,wd,nesterov,schedule,clip,native", LONG,
                         ids=["%s-wd%d-nest%d-%s-clip%d-%s" % c for c in LONG])
def test_200_gradients_match_torch(coordinator, opt, wd, nesterov, schedule, clip, native):
    steps = 200
    grads, init, base = gradients(steps, seed=13), initial(), BASE_LR[opt]
    decay = 150
    if native is None:
        args = recipe_args(opt, wd, nesterov, schedule, clip, base, decay_steps=decay, warmup=10)
        sched = lambda_scheduler(schedule, base, decay_steps=decay, warmup=10)
    else:
        decay = steps  # torch's cosine goes up again after T_max; ours stays at the floor
        args = recipe_args(opt, wd, nesterov, schedule, clip, base, decay_steps=decay, warmup=0)
        if native == "StepLR":
            sched = lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=S, gamma=GAMMA)
        elif native == "CosineAnnealingLR":
            sched = lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(
                o, T_max=decay, eta_min=LR_MIN_FACTOR * base)
        else:
            sched = lambda o: torch.optim.lr_scheduler.LinearLR(
                o, start_factor=1.0, end_factor=LR_MIN_FACTOR, total_iters=decay)
    ours = run_syncrep(coordinator, args, grads, init)
    ref = run_torch(opt, wd, nesterov, clip, grads, init, base, sched)
    assert_close(ours, ref)


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_sparse_rows_match_torch(coordinator, opt):
    """Only the touched rows change: torch.optim.SGD on a sparse gradient,
    torch.optim.SparseAdam (whose epsilon is TensorFlow's, outside the bias
    correction: equal within the tolerance, not bit for bit)."""
    rows, width, steps = 10, 3, 40
    rng = np.random.default_rng(5)
    init = rng.standard_normal((rows, width)).astype(np.float32)
    pushes = []
    for _ in range(steps):
        idx = np.sort(rng.choice(rows, size=4, replace=False)).astype(np.int64)
        pushes.append((idx, rng.standard_normal((4, width)).astype(np.float32)))
    base = BASE_LR[opt]
    c0 = coordinator("--replicas-to-aggregate", "1", "--init-tokens", "0",
                     "--checkpoint-every-steps", "0", "--optimizer", opt, "--learning-rate",
                     repr(base))
    with syncrep.Client(c0.endpoint, task_index=0, timeout=20.0) as c:
        c.declare("emb", init)
        c.ready()
        for idx, r in pushes:
            c.push_sparse("emb", idx, r)
            c.step()
        ours = c.pull("emb")
    p = torch.tensor(init, requires_grad=True)
    o = torch.optim.SGD([p], lr=base) if opt == "sgd" else torch.optim.SparseAdam([p], lr=base)
    for idx, r in pushes:
        p.grad = torch.sparse_coo_tensor(torch.tensor(idx)[None, :], torch.tensor(r),
                                         (rows, width))
        o.step()
    np.testing.assert_allclose(ours, p.detach().numpy(), rtol=RTOL, atol=RTOL)
    touched = set(int(i) for idx, _ in pushes for i in idx)
    for r in set(range(rows)) - touched:
        assert np.array_equal(ours[r], init[r])


def test_recipe_is_kept_and_the_rate_is_a_function_of_the_step(coordinator, tmp_path):
    """The schedule and clipping are the job's recipe: a restart without them
    keeps them, one with another value is refused naming the option; the
    status reports the rate of the next update, the same after the restart."""
    import json
    import subprocess
    from conftest import SYNCREP_BIN

    base, steps = 0.1, 7
    recipe = ["--optimizer", "adamw", "--learning-rate", repr(base), "--lr-schedule", "cosine",
              "--warmup-steps", "3", "--decay-steps", "10", "--lr-min", "0.01",
              "--clip-norm", "1"]
    c0 = coordinator("--replicas-to-aggregate", "1", "--init-tokens", "0", *recipe)
    with syncrep.Client(c0.endpoint, task_index=0, timeout=20.0) as c:
        c.declare("w", np.zeros(4, np.float32))
        c.ready()
        for _ in range(steps):
            c.push("w", np.ones(4, np.float32))
            c.step()

    def status(endpoint):
        out = subprocess.run([SYNCREP_BIN, "status", "--connect", endpoint, "--json"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
        return json.loads(out)

    want = 0.01 + (base - 0.01) * (1 + math.cos(math.pi * (steps - 3) / 10)) / 2
    assert status(c0.endpoint)["learning_rate"] == pytest.approx(want, rel=1e-15)
    assert c0.stop() == 0
    refused = subprocess.run([SYNCREP_BIN, "coordinator", "--store", c0.store, "--bind",
                              c0.endpoint, "--replicas-to-aggregate", "1", "--clip-norm", "2"],
                             capture_output=True, text=True, timeout=20)
    assert refused.returncode == 1
    assert "--clip-norm 1, given --clip-norm 2" in refused.stderr
    c0.args = ["--replicas-to-aggregate", "1"]  # the store's recipe
    c0.start()
    assert conftest_wait(lambda: "learning_rate" in status_or_empty(status, c0.endpoint))
    st = status(c0.endpoint)
    assert st["optimizer"] == "adamw" and st["global_step"] == steps
    assert st["learning_rate"] == pytest.approx(want, rel=1e-15)


def status_or_empty(status, endpoint):
    try:
        return status(endpoint)
    except Exception:
        return {}


def conftest_wait(pred):
    from conftest import wait_until
    return wait_until(pred)
