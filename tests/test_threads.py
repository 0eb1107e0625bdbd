"""The helper thread (minigrad.threads) and the operations that hand it half their work: each
must compute what the plain call on one thread computes."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

import minigrad as mg
from minigrad import backend, threads


@pytest.fixture(params=["spinning", "sleeping"])
def helper(request, two_threads):
    if request.param == "spinning":
        if not two_threads.spins:
            pytest.skip("no pthread spin locks in this C library")
        return two_threads
    return threads.SleepingHelper()


def test_run_computes_both_halves_at_once(helper):
    # the helper's half starts while the caller's half is still running
    started = threading.Event()
    seen = []

    def second():
        started.set()
        seen.append("second")

    def first():
        assert started.wait(timeout=10), "the helper never started its half"
        seen.append("first")

    helper.run(second, first)
    assert sorted(seen) == ["first", "second"]


def test_an_error_in_either_half_reaches_the_caller_and_the_helper_survives(helper):
    def fail():
        raise ValueError("half failed")

    with pytest.raises(ValueError, match="half failed"):
        helper.run(fail, lambda: None)
    with pytest.raises(ValueError, match="half failed"):
        helper.run(lambda: None, fail)
    out = []
    helper.run(lambda: out.append(2), lambda: out.append(1))
    assert sorted(out) == [1, 2]


def test_a_nested_or_concurrent_run_computes_in_place(two_threads):
    # a run() inside a run() (or from a second thread while one runs) cannot wait for the
    # helper, which is busy: it computes both halves itself
    out = []
    two_threads.run(
        lambda: out.append("outer second"),
        lambda: two_threads.run(lambda: out.append("inner second"), lambda: out.append("inner")),
    )
    assert sorted(out) == ["inner", "inner second", "outer second"]


def _blas_threads():
    from threadpoolctl import threadpool_info

    counts = [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]
    if not counts:
        pytest.skip("no BLAS that threadpoolctl can control")
    return set(counts)


def test_the_idle_helper_parks_and_wakes_again(two_threads, monkeypatch):
    if not two_threads.spins:
        pytest.skip("no pthread spin locks in this C library")
    monkeypatch.setattr(threads, "IDLE_SECONDS", 0.01)
    two_threads.run(lambda: None, lambda: None)
    deadline = time.monotonic() + 10
    while two_threads._awake.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not two_threads._awake.is_set(), "the watchdog never parked the idle helper"
    out = []
    two_threads.run(lambda: out.append(2), lambda: out.append(1))
    assert sorted(out) == [1, 2]


@pytest.mark.skipif(
    threads._current_cpu() is None or len(os.sched_getaffinity(0)) < 2,
    reason="needs sched_getcpu and two CPUs",
)
def test_the_helper_keeps_off_the_cpu_of_the_thread_that_made_it():
    """Woken on its waker's CPU, a spinning helper would share it for a while (see threads);
    so a new helper's thread is pinned to the process's other CPUs. The thread it runs on
    reports its own CPU set here."""
    pinned = {}

    def report(creator_cpu):
        threads._keep_off(creator_cpu)
        pinned["cpus"] = os.sched_getaffinity(0)

    cpu, allowed = threads._current_cpu(), os.sched_getaffinity(0)
    reporter = threading.Thread(target=report, args=(cpu,))
    reporter.start()
    reporter.join()
    assert pinned["cpus"] == allowed - {cpu}
    assert os.sched_getaffinity(0) == allowed  # the calling thread is never pinned
    threads._keep_off(None)  # nothing to keep off: nothing changes
    assert os.sched_getaffinity(0) == allowed


@pytest.mark.skipif(
    threads._current_cpu() is None or len(os.sched_getaffinity(0)) < 2,
    reason="needs sched_getcpu and two CPUs",
)
def test_the_helper_thread_runs_on_all_cpus_but_one(two_threads):
    if not two_threads.spins:
        pytest.skip("no pthread spin locks in this C library")
    two_threads.run(lambda: None, lambda: None)
    (helper,) = [t for t in threading.enumerate() if t.name == "minigrad-helper"]
    allowed = os.sched_getaffinity(0)
    assert len(allowed - os.sched_getaffinity(helper.native_id)) == 1  # (a thread id: Linux)


def test_blas_runs_on_one_thread_until_set_num_threads_1(two_threads):
    if not two_threads.spins:
        pytest.skip("no pthread spin locks in this C library")
    from threadpoolctl import threadpool_limits

    mg.set_num_threads(1)  # a fresh start: BLAS as it was
    with threadpool_limits(limits=2, user_api="blas"):
        mg.set_num_threads(2)
        two_threads.run(lambda: None, lambda: None)  # wakes the helper
        assert _blas_threads() == {1}
        mg.set_num_threads(1)
        assert _blas_threads() == {2}


def test_gil_hand_offs_are_short_until_set_num_threads_1(two_threads):
    """From the helper's first task on, CPython forces a GIL switch after
    HANDOFF_SWITCH_INTERVAL, not its default 5 ms; set_num_threads(1) puts the user's
    interval back."""
    if not two_threads.spins:
        pytest.skip("no pthread spin locks in this C library")
    import sys

    mg.set_num_threads(1)  # a fresh start
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        mg.set_num_threads(2)
        two_threads.run(lambda: None, lambda: None)  # wakes the helper
        assert sys.getswitchinterval() == pytest.approx(threads.HANDOFF_SWITCH_INTERVAL)
        mg.set_num_threads(1)
        assert sys.getswitchinterval() == pytest.approx(0.005)
    finally:
        mg.set_num_threads(2)
        sys.setswitchinterval(before)


def test_set_num_threads_turns_the_helper_off_and_on(two_threads):
    mg.set_num_threads(1)
    assert mg.get_num_threads() == 1 and threads.helper() is None
    mg.set_num_threads(8)  # minigrad uses at most two
    assert mg.get_num_threads() == 2 and threads.helper() is two_threads
    for wrong in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="set_num_threads"):
            mg.set_num_threads(wrong)


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [
        ((512, 64), (64, 96)),  # rows of a matrix
        ((6, 64, 48), (6, 48, 80)),  # matrices of a batch
        ((2, 3, 64, 64), (2, 3, 64, 64)),  # a batch of batches
        ((3, 300, 40), (40, 50)),  # a broadcast b: left to NumPy
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_in_halves_equals_one_product(two_threads, monkeypatch, shape_a, shape_b, dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape_a).astype(dtype)
    b = rng.standard_normal(shape_b).astype(dtype)
    monkeypatch.setattr(backend, "PRODUCT_MIN_SIZE", 1)  # split even these small products
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(backend.matmul(a, b), a @ b, rtol=tolerance, atol=tolerance)
    # transposed views, as the products of backward take them
    at, bt = np.ascontiguousarray(a.swapaxes(-1, -2)), np.ascontiguousarray(b.swapaxes(-1, -2))
    np.testing.assert_allclose(
        backend.matmul(at.swapaxes(-1, -2), bt.swapaxes(-1, -2)),
        a @ b,
        rtol=tolerance,
        atol=tolerance,
    )


@pytest.mark.parametrize("split", [True, False])
def test_matmul_adds_a_row_to_the_product(two_threads, monkeypatch, split):
    rng = np.random.default_rng(1)
    a, b, row = (
        rng.standard_normal((300, 40)),
        rng.standard_normal((40, 50)),
        rng.standard_normal(50),
    )
    monkeypatch.setattr(backend, "PRODUCT_MIN_SIZE", 1 if split else 1 << 40)
    np.testing.assert_allclose(backend.matmul(a, b, add=row), a @ b + row, rtol=1e-12)


def test_matmul_pair_computes_both_products_each_on_its_own_thread(two_threads, monkeypatch):
    rng = np.random.default_rng(2)
    a1, b1 = rng.standard_normal((8, 64, 32)), rng.standard_normal((8, 32, 64))
    a2, b2 = rng.standard_normal((200, 30)), rng.standard_normal((30, 70))
    monkeypatch.setattr(backend, "PRODUCT_MIN_SIZE", 1)
    callers = set()
    helper = threads.helper()
    run = helper.run

    def watched_run(second, first):
        def second_noted():
            callers.add(threading.get_ident())
            second()

        run(second_noted, first)

    monkeypatch.setattr(helper, "run", watched_run)
    first, second = backend.matmul_pair((a1, b1), (a2, b2))
    np.testing.assert_allclose(first, a1 @ b1, rtol=1e-12)
    np.testing.assert_allclose(second, a2 @ b2, rtol=1e-12)
    assert callers and threading.get_ident() not in callers  # the second ran on the helper
    # a missing pair gives None; the other product is still computed
    assert backend.matmul_pair(None, (a2, b2))[0] is None
    np.testing.assert_allclose(backend.matmul_pair((a1, b1), None)[0], a1 @ b1, rtol=1e-12)


def _assert_two_threads_match_one(value_and_grads, monkeypatch):
    """value_and_grads() with every product split between the threads, then on one thread."""
    monkeypatch.setattr(backend, "PRODUCT_MIN_SIZE", 1)
    split = value_and_grads()
    mg.set_num_threads(1)
    plain = value_and_grads()
    for ours, theirs in zip(split, plain):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_attention_products_on_two_threads_match_one(two_threads, monkeypatch):
    q = mg.randn(2, 4, 64, 32, requires_grad=True)
    k = mg.randn(2, 4, 64, 32, requires_grad=True)
    grad = mg.randn(2, 4, 64, 64)

    def value_and_grads():
        scores = q @ k.transpose(-1, -2)
        scores.backward(grad)
        result = [scores.numpy().copy(), q.grad.numpy().copy(), k.grad.numpy().copy()]
        q.grad = k.grad = None
        return result

    _assert_two_threads_match_one(value_and_grads, monkeypatch)


def test_a_linear_layer_on_two_threads_matches_one(two_threads, monkeypatch):
    layer = mg.nn.Linear(64, 48)
    x = mg.randn(4, 128, 64, requires_grad=True)
    grad = mg.randn(4, 128, 48)

    def value_and_grads():
        y = layer(x)
        y.backward(grad)
        result = [y.numpy().copy(), x.grad.numpy().copy()]
        result += [layer.weight.grad.numpy().copy(), layer.bias.grad.numpy().copy()]
        x.grad = layer.weight.grad = layer.bias.grad = None
        return result

    _assert_two_threads_match_one(value_and_grads, monkeypatch)


def test_adamw_on_two_threads_matches_one(two_threads, monkeypatch):
    def train(threads_count):
        mg.set_num_threads(threads_count)
        mg.manual_seed(0)
        param = mg.nn.Parameter(mg.randn(300, 300))  # above PARALLEL_MIN_SIZE
        opt = mg.optim.AdamW([param], lr=0.1)
        for step in range(3):
            param.grad = mg.full((300, 300), float(step + 1)) - param.detach()
            opt.step()
        return param.numpy().copy()

    assert 300 * 300 >= backend.PARALLEL_MIN_SIZE // 2
    monkeypatch.setattr(backend, "PARALLEL_MIN_SIZE", 1 << 10)
    np.testing.assert_array_equal(train(2), train(1))


def test_the_helper_survives_fork(two_threads):
    # start the helper
    backend.in_two_halves(lambda a: a.__iadd__(1), np.zeros(1 << 18), writes=(0,))
    pid = os.fork()
    if pid == 0:  # the child: a new helper, not a hang on the parent's dead thread
        try:
            out = np.zeros(1 << 18)
            backend.in_two_halves(lambda a: a.__iadd__(1), out, writes=(0,))
            os._exit(0 if out.min() == 1 else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _spinning(helper):
    if not helper.spins:
        pytest.skip("no pthread spin locks in this C library")
    return helper


def _post(helper, task) -> bool:
    """helper.post(task), tried again while the watchdog holds the helper (parking it)."""
    deadline = time.monotonic() + 10
    while not helper.post(task):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def test_posted_tasks_run_in_order_and_finish_posted_waits_for_them(two_threads):
    helper = _spinning(two_threads)
    done = []
    for i in range(5):
        assert _post(helper, lambda i=i: (time.sleep(0.002), done.append(i)))
    helper.finish_posted()
    assert done == [0, 1, 2, 3, 4]
    # a run() by the thread that posted waits for its posts as well: they come first
    assert _post(helper, lambda: (time.sleep(0.01), done.append("posted")))
    helper.run(lambda: done.append("second"), lambda: None)
    assert done[-2:] == ["posted", "second"]
    helper.finish_posted()
    helper.finish_posted()  # nothing posted: nothing to wait for


def test_an_error_in_a_posted_task_reaches_finish_posted(two_threads):
    helper = _spinning(two_threads)

    def fail():
        raise ValueError("posted task failed")

    done = []
    assert _post(helper, fail)
    assert helper.post(lambda: done.append("after"))  # the queue goes on
    with pytest.raises(ValueError, match="posted task failed"):
        helper.finish_posted()
    assert done == ["after"]
    assert _post(helper, lambda: done.append("again"))  # and the helper is free again
    helper.finish_posted()
    assert done == ["after", "again"]


def test_a_second_thread_cannot_post_while_the_first_has_posts(two_threads):
    helper = _spinning(two_threads)
    release = threading.Event()
    assert _post(helper, lambda: release.wait(10))
    answers, out = [], []

    def other():
        answers.append(helper.post(lambda: None))  # refused: the caller computes it itself
        helper.run(lambda: out.append(2), lambda: out.append(1))  # both halves in place

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(10)
    release.set()
    helper.finish_posted()
    assert answers == [False] and sorted(out) == [1, 2]
    assert _post(helper, lambda: None)
    threads.finish_posted()


def test_backward_posts_the_weight_gradients_and_hands_them_on_complete(two_threads, monkeypatch):
    helper = _spinning(two_threads)
    monkeypatch.setattr(backend, "PRODUCT_MIN_SIZE", 1)
    posted = []
    post = helper.post

    def slow_post(task):  # slow tasks: a gradient read before the wait would be garbage
        if "weight_grads" in task.__qualname__:
            posted.append(task)
        return post(lambda: (time.sleep(0.005), task()))

    monkeypatch.setattr(helper, "post", slow_post)
    layer = mg.nn.Linear(64, 48)
    x = mg.randn(4, 128, 64, requires_grad=True)
    grad = mg.randn(4, 128, 48)
    seen_by_hook = []
    layer.weight.register_hook(lambda g: seen_by_hook.append(g.numpy().copy()))

    def grads_of(y):
        y.backward(grad)
        result = [g.numpy().copy() for g in (x.grad, layer.weight.grad, layer.bias.grad)]
        x.grad = layer.weight.grad = layer.bias.grad = None
        return result

    twice = grads_of(layer(x) + layer(x))
    assert posted, "the weight gradients were not posted"
    once = grads_of(layer(x))
    assert len(posted) == 3
    np.testing.assert_allclose(twice[1], 2 * once[1], rtol=1e-5, atol=1e-5)  # a leaf used twice
    np.testing.assert_allclose(seen_by_hook[-1], once[1])  # hooks see the finished gradient
    g, xv = grad.numpy().reshape(-1, 48), x.numpy().reshape(-1, 64)
    np.testing.assert_allclose(once[1], g.T @ xv, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(once[2], g.sum(axis=0), rtol=1e-4, atol=1e-4)
    with mg.autograd.detect_anomaly():  # checks each gradient as it comes: after the wait
        np.testing.assert_allclose(grads_of(layer(x))[1], once[1])


def test_an_error_in_backward_leaves_the_helper_free(two_threads, monkeypatch):
    helper = _spinning(two_threads)
    monkeypatch.setattr(backend, "PRODUCT_MIN_SIZE", 1)

    class Fails(mg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.copy()

        @staticmethod
        def backward(ctx, grad):
            raise ArithmeticError("backward failed")

    layer = mg.nn.Linear(64, 48)
    x = mg.randn(256, 64, requires_grad=True)
    y = layer(x) + Fails.apply(layer(x))  # the Linear posts before Fails' backward runs
    with pytest.raises(ArithmeticError, match="backward failed"):
        y.sum().backward()
    assert helper._poster is None
    assert _post(helper, lambda: None)
    helper.finish_posted()


def test_a_run_nested_in_a_posting_threads_run_computes_in_place(two_threads):
    # with posts queued, a run() inside a run() must not take the outer run's signal
    helper = _spinning(two_threads)
    out = []
    assert _post(helper, lambda: time.sleep(0.005))
    helper.run(
        lambda: (time.sleep(0.01), out.append("outer second")),
        lambda: helper.run(lambda: out.append("inner second"), lambda: out.append("inner")),
    )
    assert sorted(out) == ["inner", "inner second", "outer second"]
    helper.finish_posted()
