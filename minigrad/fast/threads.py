"""The second core: a helper thread that computes one half of a big array operation.

NumPy releases the GIL inside its loops and its BLAS calls, so two threads can compute the
two halves of an operation at the same time::

    main thread                                helper thread
    task = second half; post.release()  ->     post.acquire()   (spinning, GIL released)
    first half                                 task()
    done.acquire()  (spinning)          <-     done.release()

What costs is the hand-off: a thread that sleeps must be woken, 50 us to milliseconds on a
busy machine. So while minigrad is working, the helper *spins* for its next task, as
PyTorch's OpenMP threads do (``post`` and ``done`` are glibc spin locks, called through
ctypes, which releases the GIL while it spins). Only work of a few hundred microseconds is
worth a hand-off; the kernels decide (``arrays.PARALLEL_MIN_SIZE``).

What minigrad changes in the process, and when it gives it back:

- The helper thread starts on the first operation big enough to use it, asleep until then.
- While the helper is awake, BLAS runs on one thread (the helper owns the second core;
  OpenBLAS's own workers would fight it for it) and Python's switch interval is
  ``SWITCH_INTERVAL`` (the helper needs the GIL back from a caller that runs Python between
  its NumPy calls; CPython's default, 5 ms, would make it wait that long).
- After ``IDLE_SECONDS`` without a task, a watchdog parks the helper: it sleeps on an Event
  and burns no CPU, and BLAS's thread count and the switch interval are put back as they
  were (unless the user changed them meanwhile).
- Where another process competes for the cores, a spinning helper costs more than it gives:
  the watchdog reads how long each of the two threads waited for a CPU
  (``/proc/self/task/*/schedstat``) and, past ``CONTENDED_FRACTION`` of the time, parks the
  helper for a while (``BACKOFF_SECONDS``, doubling while the contention lasts).

``set_num_threads(1)`` or ``MINIGRAD_NUM_THREADS=1`` turns the helper off. Where the C
library has no spin locks (macOS, Windows, musl) the helper sleeps between tasks.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from contextlib import contextmanager

IDLE_SECONDS = 0.05  # the helper spins this long (up to twice this long) after its last task
SWITCH_INTERVAL = 2e-4  # s, while the helper is awake; CPython's default is 5e-3
CONTENDED_FRACTION = 0.1  # of the time a thread may wait for a CPU before the helper backs off
BACKOFF_SECONDS = 0.5  # first pause after contention; doubles up to MAX_BACKOFF_SECONDS
MAX_BACKOFF_SECONDS = 30.0
MIN_SHARE = 0.2  # neither thread gets less than this share of the rows of a split
_NAP = object()  # the watchdog's task for an idle helper: go to sleep


def _spin_lock_calls():
    """(acquire, release, init) on glibc's pthread spin locks, or None without them. acquire
    releases the GIL while it spins (ctypes.CDLL); release keeps it (ctypes.PyDLL): a store."""
    try:
        libc, libc_keeping_gil = ctypes.CDLL(None), ctypes.PyDLL(None)
        calls = (
            libc.pthread_spin_lock,
            libc_keeping_gil.pthread_spin_unlock,
            libc.pthread_spin_init,
        )
    except (OSError, AttributeError):  # no C library by that name, or no spin locks in it
        return None
    for call in calls:
        call.argtypes, call.restype = (ctypes.c_void_p,), ctypes.c_int
    calls[2].argtypes = (ctypes.c_void_p, ctypes.c_int)
    return calls


_SPIN_LOCK = _spin_lock_calls()


class _SpinSemaphore:
    """A binary semaphore, taken at first: one thread releases it, the other acquires it by
    spinning (without the GIL)."""

    def __init__(self):
        acquire, release, init = _SPIN_LOCK
        self._word = ctypes.c_int()
        self._address = ctypes.addressof(self._word)
        self._acquire, self._release = acquire, release
        init(self._address, 0)
        acquire(self._address)

    def acquire(self) -> None:
        self._acquire(self._address)

    def release(self) -> None:
        self._release(self._address)


def _semaphore():
    return _SpinSemaphore() if _SPIN_LOCK is not None else threading.Semaphore(0)


class _Blas:
    """BLAS's thread count, read and set through OpenBLAS's own calls (found by threadpoolctl):
    they act process-wide from any thread. The libraries are looked up again when modules
    were imported since the last look (SciPy brings an OpenBLAS of its own)."""

    def __init__(self):
        self._calls = []  # (get, set) per BLAS library
        self._lock = threading.Lock()
        self._depth, self._saved = 0, []
        self._modules_seen = -1  # len(sys.modules) at the last look

    def _look_up(self) -> None:
        if len(sys.modules) == self._modules_seen:
            return
        self._modules_seen = len(sys.modules)
        try:
            from threadpoolctl import ThreadpoolController

            controllers = ThreadpoolController().select(user_api="blas").lib_controllers
        except Exception:  # (threadpoolctl missing or unable to read this platform)
            return
        self._calls = []
        for controller in controllers:
            getter = getattr(controller, "_get_symbol", lambda name: None)
            get = getter("openblas_get_num_threads")
            set_ = getter("openblas_set_num_threads")
            if get is not None and set_ is not None:
                self._calls.append((get, set_))

    def counts(self) -> list:
        return [get() for get, _ in self._calls]

    def set_counts(self, counts) -> None:
        for (_, set_), count in zip(self._calls, counts):
            set_(count)

    def hold_at_one(self) -> None:
        """BLAS on one thread until the matching ``release``. Holds may overlap (the helper
        while awake, a product on one thread while backing off): the first one notes the
        counts, the last one gives them back, unless the user changed them in between."""
        with self._lock:
            if self._depth == 0:
                self._look_up()
                self._saved = self.counts()
                self.set_counts([1] * len(self._saved))
            self._depth += 1

    def release(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self.counts() == [1] * len(self._saved):
                self.set_counts(self._saved)

    @contextmanager
    def one_thread(self):
        """BLAS on one thread inside the block."""
        self.hold_at_one()
        try:
            yield
        finally:
            self.release()


_blas = None


def blas() -> _Blas:
    global _blas
    if _blas is None:
        _blas = _Blas()
    return _blas


def _waited_for_cpu_ns(native_id):
    """Nanoseconds the thread has spent runnable but waiting for a CPU (Linux), or None."""
    try:
        with open(f"/proc/self/task/{native_id}/schedstat") as stat:
            return int(stat.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


class Helper:
    """``run(second, first)`` calls ``second()`` on the helper thread and ``first()`` on the
    calling thread, at the same time, and returns when both are done (re-raising an error of
    either). One thread at a time has the helper; another that asks meanwhile, or one that
    asks during a backoff, computes both halves itself."""

    def __init__(self):
        self._post, self._done = _semaphore(), _semaphore()
        self.spins = _SPIN_LOCK is not None
        self._task = None
        self._error = None
        self._busy = threading.Lock()  # held by the thread that has the helper, and by parking
        self._awake = threading.Event()  # clear: the helper sleeps (no CPU)
        self._runs = 0  # runs so far: the watchdog parks the helper when this stops moving
        self._caller = None  # native id of the thread that ran last
        self._backoff_until = 0.0
        self._backoff = BACKOFF_SECONDS
        self._cpu_waits, self._clean_looks = {}, 0
        self._shares = {}  # bit length of a work size -> the caller's share of its rows
        self._finished = 0.0  # when the helper finished its last task
        self._user_interval = None  # the switch interval before the wake
        self._set_interval = None  # the switch interval while awake
        self._blas = blas()
        self._helper_id = None
        threading.Thread(target=self._serve, name="minigrad-helper", daemon=True).start()
        threading.Thread(target=self._watch, name="minigrad-watchdog", daemon=True).start()

    def split(self, rows: int, size: int) -> int:
        """How many of ``rows`` the caller should take (the helper takes the rest), for work
        on ``size`` values: the share that made both finish together last time (see
        ``_learn``), at least one row each."""
        share = self._shares.get(size.bit_length(), 0.5)
        return min(rows - 1, max(1, round(rows * share)))

    def run(self, second, first, balance=None) -> None:
        """``balance``: (size, the caller's share of the rows) where the work was split by
        ``split``, so that the next split of that size can be better balanced."""
        if time.monotonic() < self._backoff_until or not self._busy.acquire(blocking=False):
            second()
            first()
            return
        try:
            self._caller = threading.get_native_id()
            if not self._awake.is_set():
                self._wake()
            self._runs += 1
            self._task = second
            start = time.perf_counter()
            self._post.release()
            try:
                first()
            finally:
                caller_done = time.perf_counter()
                self._done.acquire()  # never leave the helper working on our arrays
            error, self._error = self._error, None
            if balance is not None and error is None:
                self._learn(*balance, caller_done - start, self._finished - start)
        finally:
            self._busy.release()
        if error is not None:
            raise error

    def _learn(self, size: int, share: float, caller_seconds: float, helper_seconds: float):
        """The caller's share that would have made both threads finish together, from how
        long each took for its part: the helper starts late (it must take the GIL from the
        caller) and may run slower (its core shared with others). Smoothed over calls."""
        caller_rate, helper_rate = caller_seconds / share, helper_seconds / (1.0 - share)
        balanced = helper_rate / (caller_rate + helper_rate)
        key = size.bit_length()
        smoothed = 0.7 * self._shares.get(key, 0.5) + 0.3 * balanced
        self._shares[key] = min(max(smoothed, MIN_SHARE), 1.0 - MIN_SHARE)

    def _serve(self) -> None:  # the helper thread
        self._helper_id = threading.get_native_id()
        self._awake.wait()  # asleep until the first task wakes us
        while True:
            self._post.acquire()  # spinning until a task (or a nap) is posted
            task, self._task = self._task, None
            if task is _NAP:
                self._done.release()
                self._awake.wait()  # asleep until a task wakes us again
                continue
            try:
                task()
            except BaseException as error:  # handed to the thread that waits
                self._error = error
            self._finished = time.perf_counter()
            # straight back to the spin, never to the wait: a nap posted meanwhile (parking
            # clears _awake first) must find us at the post, or its parker would wait forever
            self._done.release()

    def _wake(self) -> None:  # called with _busy held
        self._blas.hold_at_one()
        self._user_interval, self._set_interval = sys.getswitchinterval(), None
        if self._user_interval > SWITCH_INTERVAL:
            sys.setswitchinterval(SWITCH_INTERVAL)
            self._set_interval = sys.getswitchinterval()  # (as Python rounds it)
        self._cpu_waits = {}  # native thread id -> (when, ns waited for a CPU), since the wake
        self._contended()  # (the first readings: the watchdog's first look compares with them)
        self._awake.set()

    def _watch(self) -> None:  # the watchdog thread
        seen = -1
        while True:
            self._awake.wait()
            time.sleep(IDLE_SECONDS)
            if not self._busy.acquire(blocking=False):
                continue
            try:
                if self._runs == seen:
                    self._park()
                else:
                    contended = self._contended()
                    if contended:
                        self._clean_looks = 0
                        self._backoff_until = time.monotonic() + self._backoff
                        self._backoff = min(2 * self._backoff, MAX_BACKOFF_SECONDS)
                        self._park()
                    elif contended is False:  # clean for a second: contention is over
                        self._clean_looks += 1
                        if self._clean_looks * IDLE_SECONDS >= 1.0:
                            self._backoff = BACKOFF_SECONDS
                seen = self._runs
            finally:
                self._busy.release()

    def _contended(self):
        """Whether the helper or its caller waited for a CPU for more than CONTENDED_FRACTION
        of the time since the last look: True, False, or None (nothing to compare yet)."""
        now, shares = time.monotonic(), []
        for thread in (self._helper_id, self._caller):
            total = None if thread is None else _waited_for_cpu_ns(thread)
            if total is None:
                continue
            before = self._cpu_waits.get(thread)
            self._cpu_waits[thread] = (now, total)
            if before is not None and now > before[0]:
                shares.append((total - before[1]) * 1e-9 / (now - before[0]))
        return max(shares) > CONTENDED_FRACTION if shares else None

    def _park(self) -> None:  # called with _busy held
        if not self._awake.is_set():
            return
        self._awake.clear()
        self._task = _NAP
        self._post.release()
        self._done.acquire()
        self._blas.release()
        if sys.getswitchinterval() == self._set_interval:  # (unless the user changed it)
            sys.setswitchinterval(self._user_interval)

    def backing_off(self) -> bool:
        return time.monotonic() < self._backoff_until

    def park(self) -> None:
        """Put the helper to sleep now and give the settings back (see the module docstring)."""
        with self._busy:
            self._park()


def _default_threads() -> int:
    setting = os.environ.get("MINIGRAD_NUM_THREADS", "").strip()
    if setting.isdigit() and int(setting) >= 1:
        return min(int(setting), 2)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return min(cores, 2)


_threads = _default_threads()
_helper = None


def set_num_threads(count: int) -> None:
    """The threads minigrad computes with (as ``torch.set_num_threads``): 1 turns the helper
    thread off; 2 or more use it (minigrad uses at most two)."""
    global _threads
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"set_num_threads: expected an int of at least 1, got {count!r}")
    _threads = min(count, 2)
    if _threads == 1 and _helper is not None:
        _helper.park()


def get_num_threads() -> int:
    return _threads


def helper():
    """The helper thread, made on first use; None when minigrad runs on one thread."""
    global _helper
    if _threads < 2:
        return None
    if _helper is None:
        _helper = Helper()
    return _helper


def backing_off() -> bool:
    """Whether the helper is pausing for contention (see the module docstring)."""
    return _helper is not None and _helper.backing_off()


def on_one_thread() -> bool:
    """Whether minigrad computes on one thread now (set so, or backing off): then BLAS does
    too, rather than start workers that spin on a core someone else needs."""
    return _threads < 2 or backing_off()


def _forget_helper() -> None:
    global _helper
    _helper = None  # a forked child has no helper thread: it makes its own when needed


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helper)
