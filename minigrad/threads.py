"""Two cores for NumPy: a helper thread that computes one half of each big array operation.

NumPy releases the GIL inside its loops and its BLAS calls, so two threads can compute the two
halves of an operation at the same time (``backend.in_two_halves``, ``backend.matmul``), or two
independent products (``backend.matmul_pair``). What costs is the hand-off. A thread that
sleeps between tasks must be woken, and on a busy machine that takes 50 us to several ms; a
training step makes about a hundred hand-offs.
So, as PyTorch's OpenMP threads do, the helper *spins* while it waits for work:

    main thread                              helper thread
    task = second half; post.release()  ->   post.acquire()  (spinning, GIL released)
    first half                               task()
    done.acquire()  (spinning)          <-   done.release()

``post`` and ``done`` are binary semaphores built on glibc's ``pthread_spin_lock``, called
through ctypes, which releases the GIL for the call: the waiting thread spins in C while the
other one runs Python. Each is released by one thread and acquired by the other, never the
reverse. After ``IDLE_SECONDS`` without work a watchdog parks the helper (it sleeps on an
Event), and the next task wakes it.

OpenBLAS would otherwise keep a worker of its own on the second core (spinning there after
each product for up to 0.1 s), and the two would fight for it. So from the helper's first
task on, BLAS runs on one thread (set through threadpoolctl each time the helper wakes), and
``backend.matmul`` splits the big products between the two threads itself.
``set_num_threads(1)`` gives BLAS its threads back. (It must be the main thread that does:
OpenBLAS ignores a raise of its thread count from any other thread, so parking cannot.)

Even spinning, the hand-off is not free: the helper's task is Python, so the helper must take
the GIL from the thread that posted it, and a thread that finds the GIL held sleeps on a futex
until it is released. Timed in a training step here, the helper starts 40-75 us after the post
(median). So only work of a few hundred microseconds or more is worth a hand-off that waits,
and an op of many short passes (LayerNorm) stays on one thread unless it streams (below).

And where the other thread never lets go of the GIL for long enough for a sleeper to wake
(a small model's step: its NumPy calls release the GIL for a few microseconds each), the
helper gets it only when CPython forces a switch, after ``sys.getswitchinterval()``: 5 ms by
default. A helper behind on its queue then stays behind, one task per forced switch, until
the caller waits for it: right after a pause long enough to park the helper, the second and
third steps of a toy GPT (d=64, T=16) took 25 and 18 ms against 2.5. So from the helper's
first task on, the switch interval is HANDOFF_SWITCH_INTERVAL (set again at each wake, as
BLAS's thread count; ``set_num_threads(1)`` puts back what it was): the same steps take 2.6 ms.

Parking has a cost of its own, measured on a VM of 2 vCPUs: Linux tends to wake a thread on
the CPU of the thread that wakes it, so for the next steps the helper and the caller share
one CPU, the helper spinning and the caller working, a time slice each, until the scheduler
moves one of them. A toy GPT (d=64, T=16) paused 0.25 s every 10 steps had 13-36 of 195
steps at 5-45 ms instead of 2.3 (642-1073 ms for all 195, in six runs; 464-483 with a helper
that never parks). So the helper keeps off the CPU that the thread creating it ran on: it is
pinned, at its start, to the process's other CPUs (``_keep_off``; no thread of the user's is
pinned), and the caller, which may move, moves off the helper's CPU: 3-13 slow steps,
515-581 ms.

A task can also be *posted*: queued on the helper without waiting for it (``post``), where
the caller has no use for the result until later; ``finish_posted`` waits for all of them.
The helper runs its queue in order, so a ``run`` after posts also waits for them. Two users:

- the forward's *streams* (backend, "streams"): each op of a transformer block posts its
  second half and computes its first, and the caller waits only when it must read a half
  the helper may not have written yet (the loss, ``Tensor.data``). Timed in a ``small``
  step, the waits after each hand-off had cost 9-10 ms of a 55-60 ms forward;
- the backward posts each Linear's dL/dW and dL/db, which only the leaves read, at the end
  of the walk, and goes on with dL/dx meanwhile.

Where the C library has no spin locks (macOS, Windows, musl) the helper is a plain thread
that sleeps between tasks, and products stay with BLAS. ``set_num_threads(1)``, or
``MINIGRAD_NUM_THREADS=1`` in the environment, turns the helper off.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from collections import deque
from contextlib import contextmanager

IDLE_SECONDS = 0.1  # the helper spins this long (to twice this long) after its last task
HANDOFF_SWITCH_INTERVAL = 2e-4  # s; CPython's default is 5e-3 (1e-3 was not enough here)
_NAP = object()  # the watchdog's task for an idle helper: sleep until woken


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


def _sched_getcpu():
    """glibc's sched_getcpu, the CPU the calling thread runs on, or None without it."""
    try:
        call = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError):
        return None
    call.argtypes, call.restype = (), ctypes.c_int
    return call


_SCHED_GETCPU = _sched_getcpu()


def _current_cpu():
    """The CPU this thread runs on now, or None where that cannot be known."""
    if _SCHED_GETCPU is None:
        return None
    cpu = _SCHED_GETCPU()
    return cpu if cpu >= 0 else None


def _keep_off(cpu) -> None:
    """Pin the calling thread to the CPUs of the process other than ``cpu`` (see the module
    docstring); nothing where there are none, or where they cannot be known."""
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return
    try:
        others = set(os.sched_getaffinity(0)) - {cpu}
        if others:
            os.sched_setaffinity(0, others)  # (pid 0: on Linux, the calling thread alone)
    except OSError:  # (a CPU set changed under us: stay where we are)
        pass


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


class SpinningHelper:
    """The helper thread of the module docstring: ``run(second, first)`` calls ``second()`` on
    the helper and ``first()`` on the calling thread, at the same time; ``post(task)`` queues
    a task on the helper without waiting for it, and ``finish_posted()`` waits for them all.

    The helper works through a queue, in order. ``run`` queues its half and a signal behind
    it, so it waits for whatever was posted before as well."""

    spins = True

    def __init__(self):
        self._post, self._done = _SpinSemaphore(), _SpinSemaphore()
        self._queue = deque()  # the helper's tasks, in order; None parks it
        self._error = None  # the first exception raised by a task since the last wait
        self._busy = threading.Lock()  # held by the thread that has tasks on the helper
        self._poster = None  # the thread with posted tasks (it holds _busy until it waits)
        self._running = False  # a run() is waiting for its signal
        self._awake = threading.Event()
        self._tasks = 0  # queued so far: the watchdog parks the helper when this stops moving
        self._blas = None  # threadpoolctl's BLAS controllers, once the helper first wakes
        self._blas_threads = []  # their thread counts before that
        self._switch_interval = None  # sys.getswitchinterval() before the first wake
        creator_cpu = _current_cpu()
        threading.Thread(
            target=self._serve, args=(creator_cpu,), name="minigrad-helper", daemon=True
        ).start()
        threading.Thread(target=self._watch, name="minigrad-watchdog", daemon=True).start()

    def run(self, second, first) -> None:
        posting = self._poster == threading.get_ident()
        if (posting and self._running) or (  # a run nested in this thread's run, or another
            not posting and not self._busy.acquire(blocking=False)  # thread has the helper:
        ):  # both halves here, one after the other (a nested run's signal would be taken for
            second()  # the outer one's, and the other thread's would be mixed with ours)
            first()
            return
        self._running = True
        try:
            self._queue_task(second)
            self._queue_task(self._done.release)
            try:
                first()
            finally:
                self._done.acquire()  # never leave the helper working on our arrays
            error, self._error = self._error, None
        finally:
            self._running = False
            if not posting:
                self._busy.release()
        if error is not None:
            raise error

    def post(self, task) -> bool:
        """Queue ``task`` on the helper and return at once; False (nothing queued) where
        another thread has the helper. The thread that posted must call ``finish_posted``
        before it reads or writes what the task writes, or writes what it reads."""
        if self._poster != threading.get_ident():
            if not self._busy.acquire(blocking=False):
                return False
            self._poster = threading.get_ident()
        self._queue_task(task)
        return True

    def finish_posted(self) -> bool:
        """Wait until the tasks this thread posted are done; raise the first error of one.
        True if there were any."""
        if self._poster != threading.get_ident():
            return False
        try:
            self._queue_task(self._done.release)
            self._done.acquire()
            error, self._error = self._error, None
        finally:
            self._poster = None
            self._busy.release()
        if error is not None:
            raise error
        return True

    def _queue_task(self, task) -> None:
        if not self._awake.is_set():  # before queuing: BLAS on one thread before it starts
            self._wake()
        self._tasks += 1
        self._queue.append(task)
        self._post.release()  # a wake-up the helper may find nothing behind: harmless
        if not self._awake.is_set():  # after queuing: a nap the watchdog queued just before
            self._wake()  # ends here (see _watch)

    def _serve(self, creator_cpu) -> None:  # the helper thread
        _keep_off(creator_cpu)
        queue = self._queue
        while True:
            self._post.acquire()
            while queue:
                task = queue.popleft()
                if task is None or task is _NAP:  # parked: sleep until the next task wakes us
                    if task is None:  # (park() waits for this)
                        self._done.release()
                    self._awake.wait()
                    continue
                try:
                    task()
                except BaseException as error:  # handed to the thread that waits next
                    if self._error is None:
                        self._error = error

    def _watch(self) -> None:  # the watchdog thread
        # It parks the helper even while a thread has tasks posted (and holds _busy, maybe
        # for long: a stream that nothing has read yet): it queues a nap, after clearing
        # _awake, and every thread that queues a task checks _awake after queuing it. So a
        # task queued before the nap runs first; one queued after it wakes the helper again.
        seen = -1
        while True:
            self._awake.wait()
            time.sleep(IDLE_SECONDS)
            if self._tasks == seen and self._awake.is_set() and not self._queue:
                self._awake.clear()
                self._queue.append(_NAP)
                self._post.release()
            seen = self._tasks

    def park(self) -> None:
        """Stop spinning until the next task."""
        with self._busy:
            if self._awake.is_set():
                self._park()

    def give_blas_its_threads_back(self) -> None:
        """Park, and set BLAS's thread counts back to what they were before the first wake
        (and the switch interval)."""
        self.park()
        if self._blas is not None:
            for blas, count in zip(self._blas, self._blas_threads):
                blas.set_num_threads(count)
            self._blas = None
        if self._switch_interval is not None:
            sys.setswitchinterval(self._switch_interval)
            self._switch_interval = None

    def _wake(self) -> None:
        self._hold_blas_at_one_thread()
        self._shorten_switch_interval()
        self._awake.set()

    def _shorten_switch_interval(self) -> None:
        """GIL hand-offs within HANDOFF_SWITCH_INTERVAL (see the module docstring)."""
        if self._switch_interval is None:
            self._switch_interval = sys.getswitchinterval()
        if sys.getswitchinterval() > HANDOFF_SWITCH_INTERVAL:  # (raised again in between)
            sys.setswitchinterval(HANDOFF_SWITCH_INTERVAL)

    def _park(self) -> None:  # called with self._busy held
        self._awake.clear()
        self._queue.append(None)
        self._post.release()
        self._done.acquire()

    def _hold_blas_at_one_thread(self) -> None:
        if self._blas is None:
            from threadpoolctl import ThreadpoolController

            self._blas = ThreadpoolController().select(user_api="blas").lib_controllers
            self._blas_threads = [blas.num_threads for blas in self._blas]
        for blas in self._blas:  # every time: the user may have raised it in between
            blas.set_num_threads(1)


class SleepingHelper:
    """The same ``run`` on a thread that sleeps between tasks (no spin locks here)."""

    spins = False

    def __init__(self):
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minigrad-helper")

    def run(self, second, first) -> None:
        future = self._pool.submit(second)
        try:
            first()
        finally:
            future.result()

    def post(self, task) -> bool:  # a thread that sleeps between tasks is not worth a queue
        return False

    def finish_posted(self) -> bool:
        return False


def _default_threads() -> int:
    setting = os.environ.get("MINIGRAD_NUM_THREADS")
    if setting is not None and setting.strip().isdigit() and int(setting) >= 1:
        return min(int(setting), 2)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return min(cores, 2)


_threads = _default_threads()
_helper = None
_this_thread = threading.local()  # .alone: this thread computes everything itself


def set_num_threads(count: int) -> None:
    """The threads minigrad computes with (as ``torch.set_num_threads``): 1 turns the helper
    thread off; 2 or more use it (minigrad uses at most two)."""
    global _threads
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"set_num_threads: expected an int of at least 1, got {count!r}")
    _threads = min(count, 2)
    if _threads == 1 and isinstance(_helper, SpinningHelper):
        from minigrad import backend  # (it imports this module)

        backend.finish_stream()  # this thread's open stream, if any: parking waits for it
        _helper.give_blas_its_threads_back()


def get_num_threads() -> int:
    return _threads


def helper():
    """The helper thread, started on first use; None when minigrad runs on one thread, or
    inside ``alone()``."""
    global _helper
    if _threads < 2 or getattr(_this_thread, "alone", False):
        return None
    if _helper is None:
        _helper = SpinningHelper() if _SPIN_LOCK is not None else SleepingHelper()
    return _helper


def post(task) -> bool:
    """Queue ``task`` on the helper thread without waiting for it (see SpinningHelper.post):
    True if queued, False where the caller must run it itself (one thread, ``alone()``, a
    helper that sleeps, or another thread using it)."""
    helper_thread = helper()
    return helper_thread is not None and helper_thread.post(task)


def finish_posted() -> bool:
    """Wait for the tasks this thread posted (nothing to do when it posted none); True if
    there were any."""
    return _helper is not None and _helper.finish_posted()


@contextmanager
def alone():
    """Inside ``with alone():`` this thread hands no work to the helper: ``nn.DataParallel``
    runs one half of a batch on each thread, and each computes its half by itself."""
    was_alone = getattr(_this_thread, "alone", False)
    _this_thread.alone = True
    try:
        yield
    finally:
        _this_thread.alone = was_alone


def _forget_helper() -> None:
    global _helper
    _helper = None  # a forked child has no helper thread: it starts its own when needed


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helper)
