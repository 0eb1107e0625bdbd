"""The helper thread (minigrad.fast.threads) and the routines that hand it half their work
(minigrad.fast.arrays): each must compute what the plain call on one thread computes, and
give back what it changes in the process (BLAS's thread count, the switch interval) when it
goes to sleep."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import threading
import time
import types

import numpy as np
import pytest

import minigrad as mg
from minigrad.fast import arrays, threads

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIG = arrays.PARALLEL_MIN_SIZE  # values: in_two_halves shares arrays of this size
WAITED_FOR_CPU_NS = threads._waited_for_cpu_ns  # (the tests below replace it)


@pytest.fixture(autouse=True)
def alone_on_the_cores(monkeypatch):
    """The helper never backs off here: under `pytest -n 2` the other worker competes for
    the cores, which the watchdog would rightly read as contention (tested on its own)."""
    monkeypatch.setattr(threads, "_waited_for_cpu_ns", lambda native_id: None)
    if threads._helper is not None:
        monkeypatch.setattr(threads._helper, "_backoff_until", 0.0)


def _spinning(helper):
    if helper is None or not helper.spins:
        pytest.skip("no pthread spin locks in this C library, or fewer than two CPUs")
    return helper


@pytest.fixture(params=["spinning", "sleeping"])
def helper(request, two_threads, monkeypatch):
    """A helper of either kind: the process's spinning one, or one made as on a C library
    without spin locks (macOS, Windows, musl), which sleeps on semaphores between tasks."""
    if request.param == "spinning":
        yield _spinning(two_threads)
        return
    monkeypatch.setattr(threads, "_SPIN_LOCK", None)
    sleeping = threads.Helper()
    assert not sleeping.spins
    yield sleeping
    sleeping.park()  # gives the settings back; its two threads sleep from now on


def _wait_until(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def _parked(helper) -> bool:
    return not helper._awake.is_set()


@functools.cache
def _blas_libraries() -> list:
    """threadpoolctl's handles on the BLAS libraries loaded here, found once (finding them
    takes milliseconds; reading their thread counts then takes microseconds, well inside
    the time an awake helper stays awake)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController().select(user_api="blas").lib_controllers


def _blas_threads() -> set:
    if not _blas_libraries():
        pytest.skip("no BLAS that threadpoolctl can control")
    return {library.num_threads for library in _blas_libraries()}


def _set_blas_threads(count: int) -> None:
    for library in _blas_libraries():
        library.set_num_threads(count)


# -- Helper.run ---------------------------------------------------------------------------


def test_run_computes_both_halves_at_once_the_second_on_the_helper(helper):
    # the helper's half starts while the caller's half is still running
    started = threading.Event()
    ran_on = {}

    def second():
        ran_on["second"] = threading.get_ident()
        started.set()

    def first():
        assert started.wait(timeout=10), "the helper never started its half"
        ran_on["first"] = threading.get_ident()

    helper.run(second, first)
    assert ran_on["first"] == threading.get_ident()
    assert ran_on["second"] != threading.get_ident()


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


def test_a_nested_run_computes_both_halves_in_place(helper):
    # a run() inside a run() cannot wait for the helper, which is busy with the outer one
    out = []
    helper.run(
        lambda: out.append("outer second"),
        lambda: helper.run(lambda: out.append("inner second"), lambda: out.append("inner")),
    )
    assert sorted(out) == ["inner", "inner second", "outer second"]


def test_a_run_from_another_thread_meanwhile_computes_both_halves_on_that_thread(helper):
    ran_on, other = [], []

    def note():
        ran_on.append(threading.get_ident())

    def other_thread():
        other.append(threading.get_ident())
        helper.run(note, note)

    def ask_from_another_thread():
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join(10)

    helper.run(lambda: None, ask_from_another_thread)  # the helper is taken meanwhile
    assert ran_on == [other[0], other[0]]


def test_the_idle_helper_parks_and_wakes_again(helper, monkeypatch):
    monkeypatch.setattr(threads, "IDLE_SECONDS", 0.01)
    helper.run(lambda: None, lambda: None)
    assert _wait_until(lambda: _parked(helper)), "the watchdog never parked the idle helper"
    out = []
    helper.run(lambda: out.append(2), lambda: out.append(1))
    assert sorted(out) == [1, 2]


# -- what the helper changes while it is awake, and gives back -----------------------------


def _fresh_start():
    """The helper parked, the settings as the user left them."""
    mg.set_num_threads(1)
    mg.set_num_threads(2)


def test_while_awake_blas_runs_on_one_thread_and_gets_its_count_back_when_parked(two_threads):
    helper = _spinning(two_threads)
    from threadpoolctl import threadpool_limits

    _fresh_start()
    _blas_threads()
    with threadpool_limits(limits=2, user_api="blas"):
        helper.run(lambda: None, lambda: None)  # wakes the helper
        assert _blas_threads() == {1}
        helper.park()
        assert _blas_threads() == {2}
        helper.run(lambda: None, lambda: None)
        assert _blas_threads() == {1}
        mg.set_num_threads(1)  # parks it too
        assert _blas_threads() == {2}


@pytest.mark.parametrize("user_interval", [0.005, 0.01, 1e-4])
def test_while_awake_gil_hand_offs_are_short_and_the_interval_comes_back(
    two_threads, user_interval
):
    """While the helper is awake, CPython forces a GIL switch after SWITCH_INTERVAL at the
    latest (not its default 5 ms); parked, the user's interval is back. A user's interval
    shorter than that is left alone."""
    helper = _spinning(two_threads)
    before = sys.getswitchinterval()
    try:
        _fresh_start()
        sys.setswitchinterval(user_interval)
        helper.run(lambda: None, lambda: None)
        want = min(user_interval, threads.SWITCH_INTERVAL)
        assert sys.getswitchinterval() == pytest.approx(want)
        helper.park()
        assert sys.getswitchinterval() == pytest.approx(user_interval)
    finally:
        helper.park()
        sys.setswitchinterval(before)


def test_a_setting_the_user_changed_while_the_helper_was_awake_stays(two_threads):
    helper = _spinning(two_threads)
    from threadpoolctl import threadpool_limits

    before = sys.getswitchinterval()
    _blas_threads()
    try:
        _fresh_start()
        with threadpool_limits(limits=2, user_api="blas"):
            helper.run(lambda: None, lambda: None)
            sys.setswitchinterval(0.02)
            _set_blas_threads(3)
            helper.park()
            assert sys.getswitchinterval() == pytest.approx(0.02)
            assert _blas_threads() == {3}
    finally:
        sys.setswitchinterval(before)


# -- backing off under contention ---------------------------------------------------------


def test_a_product_while_the_helper_parks_for_a_backoff_leaves_blas_as_it_was(
    two_threads, monkeypatch
):
    """The watchdog starts a backoff, then parks the helper. A product in between runs BLAS
    on one thread itself (arrays.matmul while backing off), and is still running when the
    park gives BLAS its count back: once it is done, BLAS must have that count."""
    helper = _spinning(two_threads)
    from threadpoolctl import threadpool_limits

    _fresh_start()
    _blas_threads()
    product = arrays._product

    def product_during_the_park(*args):
        helper.park()  # the watchdog, meanwhile
        return product(*args)

    a = _random((256, 256), np.float64)
    with threadpool_limits(limits=2, user_api="blas"):
        helper.run(lambda: None, lambda: None)  # awake: BLAS on one thread
        monkeypatch.setattr(helper, "_backoff_until", time.monotonic() + 60)  # contention seen
        monkeypatch.setattr(arrays, "_product", product_during_the_park)
        np.testing.assert_allclose(arrays.matmul(a, a), a @ a, rtol=1e-12)
        assert _blas_threads() == {2}


def test_under_contention_the_helper_backs_off_parked_and_computes_in_place(
    two_threads, monkeypatch
):
    helper = _spinning(two_threads)
    _fresh_start()
    monkeypatch.setattr(threads, "IDLE_SECONDS", 0.01)
    monkeypatch.setattr(helper, "_backoff_until", 0.0)  # (put back after the test)
    monkeypatch.setattr(helper, "_backoff", 30.0)  # long enough to look at
    # every thread waits for a CPU half of the time: more than CONTENDED_FRACTION
    monkeypatch.setattr(threads, "_waited_for_cpu_ns", lambda tid: time.monotonic_ns() // 2)

    def busy():
        helper.run(lambda: None, lambda: time.sleep(0.001))
        return helper.backing_off()

    assert _wait_until(busy), "the helper never backed off"
    assert threads.backing_off() and _parked(helper)
    ran_on = []
    helper.run(lambda: ran_on.append(threading.get_ident()), lambda: None)
    assert ran_on == [threading.get_ident()]  # both halves here, the helper stays asleep
    assert arrays._helper_for(1 << 30, 2) is None


def test_contention_is_the_share_of_the_time_spent_waiting_for_a_cpu(monkeypatch):
    """The watchdog's look: contended when a thread waited for a CPU more than
    CONTENDED_FRACTION of the time since the last look."""
    share = {"now": 0.0}  # of the time the (one, here) thread waits, from the last look on
    clock = {"waited_ns": 0, "at_ns": time.monotonic_ns()}

    def waited_for_cpu_ns(native_id):
        now = time.monotonic_ns()
        clock["waited_ns"] += int(share["now"] * (now - clock["at_ns"]))
        clock["at_ns"] = now
        return clock["waited_ns"]

    monkeypatch.setattr(threads, "_waited_for_cpu_ns", waited_for_cpu_ns)
    watched = types.SimpleNamespace(
        _helper_id=None, _caller=threading.get_native_id(), _cpu_waits={}
    )
    assert threads.Helper._contended(watched) is None  # a first look: nothing to compare
    fraction = threads.CONTENDED_FRACTION
    for waiting, contended in [(fraction / 4, False), (fraction * 3, True), (0.0, False)]:
        share["now"] = waiting
        time.sleep(0.02)
        assert threads.Helper._contended(watched) is contended, waiting


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="Linux's /proc")
def test_the_wait_for_a_cpu_is_read_from_proc():
    waited = WAITED_FOR_CPU_NS(threading.get_native_id())
    assert isinstance(waited, int) and waited >= 0
    assert WAITED_FOR_CPU_NS(-1) is None  # no such thread


# -- set_num_threads ----------------------------------------------------------------------


def test_set_num_threads_turns_the_helper_off_and_on(two_threads):
    mg.set_num_threads(1)
    assert mg.get_num_threads() == 1 and threads.helper() is None
    assert mg.fast.get_num_threads() == 1  # the same setting
    mg.set_num_threads(8)  # minigrad uses at most two
    assert mg.get_num_threads() == 2 and threads.helper() is two_threads


@pytest.mark.parametrize("wrong", [0, -1, 1.5, True, "2", None])
def test_set_num_threads_wants_a_positive_int(wrong):
    with pytest.raises(ValueError, match="set_num_threads"):
        mg.set_num_threads(wrong)


@pytest.mark.parametrize(
    "setting, want", [("1", 1), ("2", 2), ("16", 2), ("0", None), ("two", None), ("", None)]
)
def test_minigrad_num_threads_sets_the_default(monkeypatch, setting, want):
    monkeypatch.setenv("MINIGRAD_NUM_THREADS", setting)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert threads._default_threads() == (want if want is not None else min(cores, 2))


# -- in_two_halves ------------------------------------------------------------------------


def _add_and_note(noted):
    """fn for in_two_halves: out = a + b, noting the thread and the rows of each call."""

    def fn(a, b, out):
        noted.append((threading.get_ident(), a.shape[0]))
        np.add(a, b, out=out)

    return fn


@pytest.mark.parametrize("rows", [2, 3, 257, BIG])
def test_in_two_halves_computes_the_plain_call_on_both_threads(two_threads, rows):
    _spinning(two_threads)
    rng = np.random.default_rng(rows)
    a, b = rng.standard_normal((rows, -(-BIG // rows))), rng.standard_normal(-(-BIG // rows))
    b = np.broadcast_to(b, a.shape)  # any array of the rows' shape
    out, noted = np.empty_like(a), []
    arrays.in_two_halves(_add_and_note(noted), a, b, out)
    np.testing.assert_array_equal(out, a + b)
    # two parts of all the rows, each of at least one row (how many each takes is learned:
    # see Helper.split), one of them on the helper
    parts = [n for _, n in noted]
    assert len(parts) == 2 and sum(parts) == rows and min(parts) >= 1
    assert {t for t, _ in noted} - {threading.get_ident()}, "no part ran on the helper"


@pytest.mark.parametrize(
    "why, shape",
    [("small", (64, 64)), ("one row", (1, BIG)), ("one thread", (BIG // 64, 64))],
)
def test_in_two_halves_makes_the_plain_call_where_sharing_does_not_pay(two_threads, why, shape):
    if why == "one thread":
        mg.set_num_threads(1)
    a = np.ones(shape)
    out, noted = np.empty_like(a), []
    arrays.in_two_halves(_add_and_note(noted), a, a, out)
    np.testing.assert_array_equal(out, 2 * a)
    assert noted == [(threading.get_ident(), shape[0])]


def test_only_the_main_thread_hands_work_to_the_helper(two_threads):
    # another thread (nn.DataParallel's second half) computes its arrays itself
    _spinning(two_threads)
    a = np.ones((BIG // 64, 64))
    out, noted, idents = np.empty_like(a), [], []

    def other():
        idents.append(threading.get_ident())
        arrays.in_two_halves(_add_and_note(noted), a, a, out)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(10)
    np.testing.assert_array_equal(out, 2 * a)
    assert noted == [(idents[0], a.shape[0])]


# -- matmul and matmul_pair ---------------------------------------------------------------


def _random(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _tolerance(dtype):
    return {"rtol": 1e-5, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}


@pytest.fixture
def split_products(two_threads, monkeypatch):
    """Every product big enough to share, the toy ones of these tests included."""
    _spinning(two_threads)
    monkeypatch.setattr(arrays, "PRODUCT_MIN_SIZE", 1)


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [
        ((512, 64), (64, 96)),  # rows of a matrix
        ((5, 64), (64, 8)),  # an odd number of rows
        ((6, 64, 48), (6, 48, 80)),  # matrices of a batch
        ((2, 3, 64, 64), (2, 3, 64, 64)),  # a batch of batches
        ((3, 300, 40), (40, 50)),  # a broadcast b: left to NumPy
        ((1, 40), (40, 50)),  # one row: nothing to split
        ((40,), (40, 50)),  # a vector: nothing to split
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_equals_one_product(split_products, shape_a, shape_b, dtype):
    a, b = _random(shape_a, dtype, 0), _random(shape_b, dtype, 1)
    got = arrays.matmul(a, b)
    assert got.shape == (a @ b).shape and got.dtype == dtype
    np.testing.assert_allclose(got, a @ b, **_tolerance(dtype))
    if a.ndim >= 2:  # transposed views, as the products of backward take them
        at = np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)
        bt = np.ascontiguousarray(b.swapaxes(-1, -2)).swapaxes(-1, -2)
        np.testing.assert_allclose(arrays.matmul(at, bt), a @ b, **_tolerance(dtype))


def test_matmul_of_mixed_dtypes_promotes_as_numpy(split_products):
    a, b = _random((300, 40), np.float32), _random((40, 50), np.float64)
    got = arrays.matmul(a, b)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, a @ b, rtol=1e-6)


@pytest.mark.parametrize("split", [True, False])
def test_matmul_adds_a_row_and_writes_into_out(two_threads, monkeypatch, split):
    _spinning(two_threads)
    monkeypatch.setattr(arrays, "PRODUCT_MIN_SIZE", 1 if split else 1 << 40)
    a, b, row = _random((300, 40), np.float64, 0), _random((40, 50), np.float64, 1), None
    row = _random(50, np.float64, 2)
    np.testing.assert_allclose(arrays.matmul(a, b, add=row), a @ b + row, rtol=1e-12)
    out = np.full((300, 50), np.nan)
    assert arrays.matmul(a, b, add=row, out=out) is out
    np.testing.assert_allclose(out, a @ b + row, rtol=1e-12)


def test_a_big_matmul_runs_half_on_the_helper(split_products, monkeypatch):
    calls = []
    run = threads.helper().run
    monkeypatch.setattr(
        threads.helper(), "run", lambda s, f, balance=None: (calls.append(1), run(s, f, balance))
    )
    a, b = _random((512, 64), np.float64), _random((64, 96), np.float64)
    np.testing.assert_allclose(arrays.matmul(a, b), a @ b, rtol=1e-12)
    assert calls == [1]


def _noting_where_the_second_runs(monkeypatch):
    callers = set()
    helper = threads.helper()
    run = helper.run

    def watched_run(second, first, balance=None):
        def second_noted():
            callers.add(threading.get_ident())
            second()

        run(second_noted, first, balance)

    monkeypatch.setattr(helper, "run", watched_run)
    return callers


def test_matmul_pair_computes_both_products_each_on_its_own_thread(split_products, monkeypatch):
    a1, b1 = _random((8, 64, 32), np.float64, 0), _random((8, 32, 64), np.float64, 1)
    a2, b2 = _random((200, 30), np.float64, 2), _random((30, 70), np.float64, 3)
    callers = _noting_where_the_second_runs(monkeypatch)
    first, second = arrays.matmul_pair((a1, b1), (a2, b2))
    np.testing.assert_allclose(first, a1 @ b1, rtol=1e-12)
    np.testing.assert_allclose(second, a2 @ b2, rtol=1e-12)
    assert callers and threading.get_ident() not in callers  # the second ran on the helper


def test_matmul_pair_gives_none_for_a_missing_pair(split_products):
    a1, b1 = _random((64, 32), np.float64, 0), _random((32, 64), np.float64, 1)
    missing, product = arrays.matmul_pair(None, (a1, b1))
    assert missing is None
    np.testing.assert_allclose(product, a1 @ b1, rtol=1e-12)
    product, missing = arrays.matmul_pair((a1, b1), None)
    assert missing is None
    np.testing.assert_allclose(product, a1 @ b1, rtol=1e-12)
    assert arrays.matmul_pair(None, None) == (None, None)


def test_matmul_pair_of_different_dtypes_computes_each_on_its_own(split_products):
    a1, b1 = _random((64, 32), np.float32, 0), _random((32, 64), np.float32, 1)
    a2, b2 = _random((64, 32), np.float64, 2), _random((32, 64), np.float64, 3)
    first, second = arrays.matmul_pair((a1, b1), (a2, b2))
    assert first.dtype == np.float32 and second.dtype == np.float64
    np.testing.assert_allclose(first, a1 @ b1, **_tolerance(np.float32))
    np.testing.assert_allclose(second, a2 @ b2, **_tolerance(np.float64))


# -- ops on two threads compute what they compute on one ----------------------------------


def _assert_two_threads_match_one(value_and_grads, exact=False):
    """value_and_grads() with the helper (every product split), then on one thread."""
    split = value_and_grads()
    mg.set_num_threads(1)
    plain = value_and_grads()
    for ours, theirs in zip(split, plain):
        if exact:
            np.testing.assert_array_equal(ours, theirs)
        else:  # round-off, at the scale of the largest value (sums split in two parts)
            scale = float(np.abs(theirs).max(initial=1.0))
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5 * scale)


def _value_and_grad_of(op, x, grad):
    def value_and_grad():
        y = op(x)
        y.backward(grad)
        result = (y.numpy().copy(), x.grad.numpy().copy())
        x.grad = None
        return result

    return value_and_grad


def _layer_norm(x):
    weight = mg.linspace(0.5, 1.5, x.shape[-1])
    return mg.ops.layer_norm(x, (x.shape[-1],), weight, mg.ones(x.shape[-1]))


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(lambda x: mg.ops.gelu(x), id="gelu"),
        pytest.param(lambda x: mg.ops.gelu(x, "tanh"), id="gelu_tanh"),
        pytest.param(lambda x: x.softmax(-1), id="softmax"),
        pytest.param(_layer_norm, id="layer_norm"),
    ],
)
def test_elementwise_and_row_ops_on_two_threads_match_one(two_threads, op):
    # in_two_halves and by_rows are a fast path: the values of one call on the whole array
    _spinning(two_threads)
    x = mg.randn(4, 300, 300, requires_grad=True)  # 360,000 values: above PARALLEL_MIN_SIZE
    assert x.numel() >= 2 * arrays.PARALLEL_MIN_SIZE
    # elementwise ops split exactly; a row op's means and sums by BLAS round alike only to
    # round-off, as the products of differently sized blocks do
    exact = op is not _layer_norm
    _assert_two_threads_match_one(_value_and_grad_of(op, x, mg.randn(4, 300, 300)), exact=exact)


def test_attention_products_on_two_threads_match_one(split_products):
    q = mg.randn(2, 4, 64, 32, requires_grad=True)
    k = mg.randn(2, 4, 64, 32, requires_grad=True)
    grad = mg.randn(2, 4, 64, 64)

    def value_and_grads():
        scores = q @ k.transpose(-1, -2)
        scores.backward(grad)
        result = [scores.numpy().copy(), q.grad.numpy().copy(), k.grad.numpy().copy()]
        q.grad = k.grad = None
        return result

    _assert_two_threads_match_one(value_and_grads)


def test_a_linear_layer_on_two_threads_matches_one(split_products):
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

    _assert_two_threads_match_one(value_and_grads)


def test_adamw_on_two_threads_matches_one_exactly(two_threads):
    _spinning(two_threads)

    def train():
        mg.manual_seed(0)
        big = mg.nn.Parameter(mg.randn(400, 400))  # above PARALLEL_MIN_SIZE: in two halves
        small = [mg.nn.Parameter(mg.randn(30, 30)) for _ in range(2)]  # updated together
        opt = mg.optim.AdamW([big, *small], lr=0.1)
        for step in range(3):
            for param in (big, *small):
                param.grad = mg.full(param.shape, float(step + 1)) - param.detach()
            opt.step()
        return [param.numpy().copy() for param in (big, *small)]

    assert 400 * 400 >= arrays.PARALLEL_MIN_SIZE
    _assert_two_threads_match_one(train, exact=True)


# -- fork ---------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_makes_its_own_helper(two_threads):
    _spinning(two_threads)

    def add_one(a):
        a += 1

    arrays.in_two_halves(add_one, np.zeros(2 * BIG))  # the parent's helper is awake
    pid = os.fork()
    if pid == 0:  # the child: a new helper, not a hang on the parent's thread, absent here
        try:
            out = np.zeros(2 * BIG)
            arrays.in_two_halves(add_one, out)
            fresh = threads.helper() is not two_threads
            os._exit(0 if out.min() == out.max() == 1 and fresh else 1)
        except BaseException:
            os._exit(2)
    assert _exit_code_of(pid, seconds=30) == 0


def _exit_code_of(pid: int, seconds: float):
    """The child's exit code; a child that hangs is killed (and reported as "hung")."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "hung"


# A park (the watchdog's, or set_num_threads(1)) may come just after the helper answered a
# task and before it is back at its wait for the next: here the helper is held up there on
# purpose, as a busy machine may hold up its thread. The park must still find it.
PARK_AFTER_AN_ANSWER = """
import threading, time
from minigrad.fast import threads

if {sleeping}:
    threads._SPIN_LOCK = None  # the helper of a C library without spin locks
helper = threads.Helper()
answer = helper._done.release


def answer_then_lose_the_cpu():
    answer()
    if threading.current_thread().name == "minigrad-helper":
        time.sleep(0.02)


helper._done.release = answer_then_lose_the_cpu
for _ in range(5):
    helper.run(lambda: None, lambda: None)
    helper.park()
print("parked")
"""


@pytest.mark.parametrize("sleeping", [False, True], ids=["spinning", "sleeping"])
def test_a_park_just_after_the_helper_answered_finds_it(sleeping):
    if not sleeping and threads._SPIN_LOCK is None:
        pytest.skip("no pthread spin locks in this C library")
    code = PARK_AFTER_AN_ANSWER.format(sleeping=sleeping)
    try:
        run = subprocess.run(  # (run from the repository: the minigrad of this tree)
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        pytest.fail("park waited forever for a helper that had gone to sleep")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["parked"]
