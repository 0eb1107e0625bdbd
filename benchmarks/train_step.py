"""One AdamW training step of a toy GPT: minigrad against its PyTorch twin, side by side.

    python benchmarks/train_step.py                 # tiny, small, medium on the CPU
    python benchmarks/train_step.py --configs tiny --steps 50
    python benchmarks/train_step.py --device cuda   # CuPy against PyTorch CUDA
    python benchmarks/train_step.py --threads 1     # each framework on one thread
    python benchmarks/train_step.py --busy 1        # beside a process that keeps a core busy
    python benchmarks/train_step.py --compare-env MINIGRAD_NUM_THREADS=1   # a third arm

How it times. Each framework runs in a process of its own, a worker that imports only that
framework, so that neither one's settings (its malloc, its BLAS thread count) apply to the
other. Both models start from the same weights (made by the minigrad worker and handed to
the PyTorch worker as NumPy arrays) and see the same batches (made by this script). The
workers take turns, in blocks of a few steps: this script tells one worker to run a block,
waits for its times and losses, then tells the next. The two processes still share the
machine's cores, and a framework's worker threads keep spinning on a core for a moment after
its last step, so on the CPU each block starts a quarter of a second after the previous one
ended, once those threads have gone to sleep; and the first step of each block, which wakes
the framework's own threads, is not timed. The warm-up steps come first, untimed, and the
median of all timed steps is reported, so that a noisy moment of the machine slows both
frameworks alike.

The table gives ms/step, the ratio minigrad / PyTorch of the two medians, the quartiles of
the block-by-block ratios (how much that ratio moves within the run: see ``paired_ratio``),
how far the two loss curves drift apart, and the memory each holds for backward (the arrays
saved by the ops, each storage counted once).

``--minigrad-env KEY=VALUE`` sets an environment variable for the minigrad worker only.
``--compare-env KEY=VALUE`` starts a second minigrad worker with that variable instead (and
without those of ``--minigrad-env``), timed in turn as a third arm against the same PyTorch
steps: its rows are labelled with its variables. ``--busy N`` keeps N more processes
spinning on the CPU for the whole run, to see how each framework fares beside a busy
process. Each option may be repeated. ``--malloc keep`` (the default) has both workers
raise glibc's malloc thresholds, as ``minigrad train`` does, so that neither pays page faults
for re-allocating each step's arrays; ``--malloc default`` leaves malloc as it comes.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import pickle
import signal
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


@dataclass
class Setting:
    vocab: int
    T: int
    d: int
    heads: int
    layers: int
    batch: int


BLOCK = 4  # steps in a row of one framework before switching to the other
# On the CPU, seconds to wait before each block: after its last product OpenBLAS's worker
# threads spin for about 0.1 s (2^28 cycles) on the core that the other framework needs
# (PyTorch's OpenMP threads, for much less). Without the wait PyTorch's `tiny` steps,
# shorter than that, ran at half their speed (16 against 7-8 ms).
SETTLE_S = 0.25

SETTINGS = {
    "tiny": Setting(vocab=32, T=16, d=32, heads=2, layers=2, batch=8),
    "small": Setting(vocab=64, T=64, d=128, heads=4, layers=4, batch=32),
    "medium": Setting(vocab=256, T=128, d=256, heads=8, layers=6, batch=16),
}
DEFAULT_STEPS = {"tiny": 200, "small": 32, "medium": 16}

PHASES = ("forward", "backward", "optimizer")
MINIGRAD_ARMS = ("minigrad", "parallel", "compare")  # the arms timed against PyTorch's

# what a busy process runs (Ctrl-C ends it quietly, as it ends the rest)
BUSY_CODE = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_DFL)\nwhile True:\n    pass\n"


def config_of(s: Setting) -> dict:
    """The GPTConfig of ``s``, as the keyword arguments the minigrad worker builds it from."""
    return dict(
        vocab_size=s.vocab,
        block_size=s.T,
        d_model=s.d,
        n_heads=s.heads,
        n_layers=s.layers,
        activation="gelu_tanh",
    )


def batches_of(s: Setting, count: int) -> list:
    """``count`` batches of (inputs, targets), int64 token ids, the same on every run."""
    rng = np.random.default_rng(0)
    return [
        (rng.integers(0, s.vocab, (s.batch, s.T)), rng.integers(0, s.vocab, (s.batch, s.T)))
        for _ in range(count)
    ]


def paired_ratio(ours: list, theirs: list) -> tuple:
    """How much the ratio minigrad / PyTorch moves within one run: each block of minigrad
    steps is divided by the PyTorch block right after it, and the median of those ratios is
    returned with their quartiles, (median, lower, upper). Neighbouring blocks share the
    machine's slow or fast phase, so the quartiles show the noise that is left."""
    ratios = sorted(a / b for a, b in zip(ours, theirs))
    if not ratios:
        return float("nan"), float("nan"), float("nan")
    if len(ratios) < 4:
        median = statistics.median(ratios)
        return median, ratios[0], ratios[-1]
    lower, median, upper = statistics.quantiles(ratios, n=4)
    return median, lower, upper


# ---------------------------------------------------------------------------------------
# This script's side: the processes, the turns, the figures


def _child_options() -> dict:
    """Popen options that make a child end with this process, however this one ends (on
    Linux: asked of the kernel before the child runs); none elsewhere."""
    if not sys.platform.startswith("linux"):
        return {}
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return {}
    pr_set_pdeathsig = 1
    return {"preexec_fn": lambda: prctl(pr_set_pdeathsig, signal.SIGKILL)}


class Worker:
    """A process of its own that imports one framework (``"minigrad"`` or ``"torch"``),
    builds the models it is told to and runs the blocks of steps it is asked for, answering
    with their times and losses. Messages go both ways as pickles over its stdin and
    stdout; whatever it prints goes to stderr."""

    def __init__(self, framework: str, env: dict | None = None, threads: int | None = None):
        self.framework, self.env = framework, dict(env or {})
        command = [sys.executable, os.path.abspath(__file__), "--worker", framework]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, **self.env},
            **_child_options(),
        )
        self.send("hello", threads)  # answered, once it has imported its framework, by
        self.info = None  # its thread counts and loaded frameworks: see ``ready``

    def ready(self) -> None:
        """Wait for the worker to be ready (started with the others, they import at once)."""
        self.info = self.receive("hello")

    def ask(self, kind: str, *args):
        """Send a message, wait for the answer; a failure in the worker is raised here."""
        self.send(kind, *args)
        return self.receive(kind)

    def send(self, kind: str, *args) -> None:
        try:
            pickle.dump((kind, *args), self.process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.process.stdin.flush()
        except BrokenPipeError:
            self.stopped()

    def receive(self, kind: str):
        try:
            status, answer = pickle.load(self.process.stdout)
        except EOFError:
            self.stopped()
        if status == "error":
            raise RuntimeError(f"the {self.framework} worker failed ({kind}):\n{answer}")
        return answer

    def stopped(self):
        code = self.process.wait()
        if code == -signal.SIGINT:  # Ctrl-C reached the worker first
            raise KeyboardInterrupt from None
        raise RuntimeError(
            f"the {self.framework} worker stopped (exit code {code}); its output is above"
        ) from None

    def close(self, now: bool = False) -> None:
        """End the worker: its stdin closed, it returns; killed if it does not soon, or at
        once with ``now``."""
        process = self.process
        if process.poll() is None and not now:
            try:
                process.stdin.close()
                process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if process.poll() is None:
            process.kill()
            process.wait()
        for pipe in (process.stdin, process.stdout):
            try:
                pipe.close()
            except OSError:  # (a write left in its buffer, to a worker that has gone)
                pass


class Processes:
    """Everything one run starts, as a context manager that stops it all on leaving (also
    on an error or Ctrl-C): the minigrad worker, with ``minigrad_env``; with
    ``compare_env`` (a dict, even empty), a second minigrad worker with those variables
    instead; a PyTorch worker unless ``with_torch`` is false; and ``busy`` processes that
    spin on the CPU, started once the workers are ready. ``threads``: each worker's thread
    count (see ``set_minigrad_threads``), or each framework's own choice."""

    def __init__(
        self,
        with_torch: bool = True,
        threads: int | None = None,
        minigrad_env: dict | None = None,
        compare_env: dict | None = None,
        busy: int = 0,
    ):
        if threads is not None and threads < 1:
            raise SystemExit(f"--threads: expected 1 or more, got {threads}")
        if busy < 0:
            raise SystemExit(f"--busy: expected 0 or more, got {busy}")
        self.minigrad = self.compare = self.torch = None
        self.busy: list = []
        try:
            self.minigrad = Worker("minigrad", minigrad_env, threads)
            if compare_env is not None:
                self.compare = Worker("minigrad", compare_env, threads)
            if with_torch:
                self.torch = Worker("torch", None, threads)
            for worker in self.workers():
                worker.ready()
            for _ in range(busy):
                self.busy.append(
                    subprocess.Popen([sys.executable, "-c", BUSY_CODE], **_child_options())
                )
        except BaseException:
            self.close(now=True)
            raise

    def workers(self) -> list:
        return [w for w in (self.minigrad, self.compare, self.torch) if w is not None]

    def close(self, now: bool = False) -> None:
        """Stop the busy processes, then the workers (at once with ``now``)."""
        for process in self.busy:  # first, so that they stop taking the cores at once
            if process.poll() is None:
                process.kill()
            process.wait()
        for worker in self.workers():
            worker.close(now)

    def __enter__(self) -> Processes:
        return self

    def __exit__(self, kind, value, trace) -> None:
        self.close(now=kind is not None)  # after an error, or Ctrl-C, nothing to wait for


def measure(
    s: Setting,
    steps: int,
    warmup: int,
    processes: Processes,
    device: str = "cpu",
    phases: bool = False,
    parallel: bool = False,
) -> dict:
    """Time ``steps`` training steps (after ``warmup``) of the GPT described by ``s`` in each
    worker of ``processes``, in turns. The row has the minigrad arm's figures (ms, and where
    PyTorch ran its ms, the ratio, block quartiles and loss drift; see ``arm_row``) and the
    saved MB of each. With ``phases``, each timed step is also split into forward, backward
    and optimizer step (synchronized on the GPU at each boundary), for the row's "phases":
    {phase: (minigrad ms, PyTorch ms)}. With ``parallel``, the minigrad worker also trains a
    copy of the model through ``nn.DataParallel`` (half the batch on each of two threads),
    for the row's "parallel" entry, a row of its own against the same PyTorch steps; the
    second minigrad worker's row, where there is one, is the entry "compare"."""
    batches = batches_of(s, warmup + steps)
    spec = {
        "config": config_of(s),
        "device": device,
        "batches": batches,
        "phases": phases,
        "parallel": parallel,
        "weights": None,
    }
    built = processes.minigrad.ask("build", spec)  # the weights for the others
    arms = {"minigrad": (processes.minigrad, "plain")}
    if parallel:
        arms["parallel"] = (processes.minigrad, "parallel")
    same = {"config": built["config"], "weights": built["weights"], "parallel": False}
    if processes.compare is not None:
        compared = processes.compare.ask("build", {**spec, **same})
        arms["compare"] = (processes.compare, "plain")
    if processes.torch is not None:
        processes.torch.ask("build", {**spec, **same})
        arms["torch"] = (processes.torch, "plain")

    # Turns of BLOCK steps, each after the others' worker threads have gone to sleep
    # (SETTLE_S); all but the first step of each block are timed (it wakes its own threads).
    times = {arm: [] for arm in arms}  # per arm, every timed step (s)
    losses = {arm: [] for arm in arms}  # per arm, every step's loss
    blocks = {arm: [] for arm in arms}  # per block, the median of its timed steps
    split = {arm: [] for arm in arms}  # per timed step: [forward, backward, optimizer]
    for start in range(0, len(batches), BLOCK):
        stop = min(start + BLOCK, len(batches))
        for arm, (worker, name) in arms.items():
            if device == "cpu":
                time.sleep(SETTLE_S)
            answer = worker.ask("block", name, start, stop)
            losses[arm].extend(answer["losses"])
            timed = []
            for offset, seconds in enumerate(answer["seconds"]):
                if offset > 0 and start + offset >= warmup:
                    timed.append(seconds)
                    if phases:
                        split[arm].append(answer["phases"][offset])
            times[arm].extend(timed)
            if timed:
                blocks[arm].append(statistics.median(timed))

    theirs = None if processes.torch is None else processes.torch.ask("saved") / 2**20
    row = arm_row("minigrad", times, blocks, losses)
    row["minigrad_saved_mb"], row["torch_saved_mb"] = built["saved"] / 2**20, theirs
    if parallel:
        row["parallel"] = arm_row("parallel", times, blocks, losses)
    if processes.compare is not None:
        row["compare"] = arm_row("compare", times, blocks, losses)
        row["compare"]["minigrad_saved_mb"] = compared["saved"] / 2**20
        row["compare"]["torch_saved_mb"] = theirs
    if phases:
        for arm in MINIGRAD_ARMS:
            target = row if arm == "minigrad" else row.get(arm)
            if target is not None:
                target["phases"] = {
                    phase: tuple(
                        1e3 * statistics.median(step[i] for step in split[name])
                        if split.get(name)
                        else None
                        for name in (arm, "torch")
                    )
                    for i, phase in enumerate(PHASES)
                }
    return row


def run(
    s: Setting,
    steps: int,
    warmup: int,
    device: str = "cpu",
    with_torch: bool = True,
    phases: bool = False,
    parallel: bool = False,
    threads: int | None = None,
    minigrad_env: dict | None = None,
    compare_env: dict | None = None,
    busy: int = 0,
) -> dict:
    """``measure`` of one setting, in processes started for it (see ``Processes``)."""
    with Processes(with_torch, threads, minigrad_env, compare_env, busy) as processes:
        return measure(s, steps, warmup, processes, device, phases, parallel)


def arm_row(arm: str, times: dict, blocks: dict, losses: dict) -> dict:
    """One minigrad arm's figures: its median ms and, where PyTorch ran, the ratio, the
    block-by-block quartiles and how far its losses drift from PyTorch's, step by step."""
    row = {"minigrad_ms": 1e3 * statistics.median(times[arm])}
    if "torch" in times:
        row["torch_ms"] = 1e3 * statistics.median(times["torch"])
        row["ratio"] = row["minigrad_ms"] / row["torch_ms"]  # the ratio of the two medians
        row["block_ratio"], row["block_low"], row["block_high"] = paired_ratio(
            blocks[arm], blocks["torch"]
        )
        row["loss_drift"] = max(
            (abs(a - b) / abs(b) for a, b in zip(losses[arm], losses["torch"])),
            default=float("nan"),
        )
    return row


def env_setting(text: str) -> tuple:
    """KEY=VALUE, for argparse."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def env_label(env: dict) -> str:
    return " ".join(f"{key}={value}" for key, value in env.items()) or "second minigrad"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default by size)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument(
        "--phases",
        action="store_true",
        help="also split each step into forward, backward and optimizer, side by side",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads of each framework (default: each its own choice, two on two cores)",
    )
    parser.add_argument(
        "--parallel",
        action="store_true",
        help="also time minigrad through nn.DataParallel (half the batch on each thread)",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="keep N more processes spinning on the CPU while the frameworks are timed",
    )
    parser.add_argument(
        "--minigrad-env",
        type=env_setting,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an environment variable for the minigrad worker only (repeatable)",
    )
    parser.add_argument(
        "--compare-env",
        type=env_setting,
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="time a second minigrad worker with this environment variable as a third arm "
        "(repeatable)",
    )
    parser.add_argument(
        "--malloc",
        choices=["keep", "default"],
        default="keep",
        help="keep: both workers raise glibc's malloc thresholds, as `minigrad train` does "
        "(freed arrays stay for the next step); default: malloc as it comes",
    )
    parser.add_argument("--worker", choices=["minigrad", "torch"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        serve(args.worker)
        return {}
    os.environ[MALLOC_SETTING] = args.malloc  # (the workers inherit it)

    with_torch = importlib.util.find_spec("torch") is not None  # imported by its worker only
    if not with_torch:
        print("PyTorch is not installed: timing minigrad alone")
    minigrad_env = dict(args.minigrad_env)
    compare_env = None if args.compare_env is None else dict(args.compare_env)
    rows = {}
    try:
        with Processes(with_torch, args.threads, minigrad_env, compare_env, args.busy) as ps:
            print(describe(ps, args.device))
            print(
                "| config | minigrad ms | PyTorch ms | ratio | block ratios (quartiles) "
                "| max loss drift | saved MB minigrad / torch |"
            )
            print("|---|---|---|---|---|---|---|")
            for name in args.configs:
                steps = args.steps or DEFAULT_STEPS[name]
                row = rows[name] = measure(
                    SETTINGS[name], steps, args.warmup, ps, args.device, args.phases, args.parallel
                )
                print_row(name, row, saved_text(row))
                if "parallel" in row:
                    print_row(f"{name}, DataParallel", row["parallel"], "as above")
                if "compare" in row:
                    compare = row["compare"]
                    print_row(f"{name}, {env_label(compare_env)}", compare, saved_text(compare))
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    if args.phases:
        print_phases(rows, compare_env)
    return rows


def describe(processes: Processes, device: str) -> str:
    """The line above the table: the device, each worker's threads and environment."""

    def threads(worker):
        blas = worker.info.get("blas")
        return f"{worker.info['threads']}" + (f" (BLAS {blas})" if blas else "")

    parts = [f"device {device}", "each framework in a process of its own"]
    mine, torch = processes.minigrad, processes.torch
    parts.append(f"threads: minigrad {threads(mine)}, torch {threads(torch) if torch else '-'}")
    if mine.env:
        parts.append(f"minigrad with {env_label(mine.env)}")
    if processes.compare is not None:
        compare = processes.compare
        parts.append(f"with {env_label(compare.env)}: minigrad {threads(compare)}")
    if processes.busy:
        count = len(processes.busy)
        parts.append(f"{count} busy process{'es' if count > 1 else ''} beside them")
    return "; ".join(parts)


def saved_text(row: dict) -> str:
    theirs = row.get("torch_saved_mb")
    return f"{row['minigrad_saved_mb']:.1f} / " + ("-" if theirs is None else f"{theirs:.1f}")


def print_row(label: str, row: dict, saved: str) -> None:
    if "torch_ms" not in row:
        print(f"| {label} | {row['minigrad_ms']:.2f} | - | - | - | - | {saved} |")
        return
    print(
        f"| {label} | {row['minigrad_ms']:.2f} | {row['torch_ms']:.2f} | {row['ratio']:.2f}x "
        f"| {row['block_low']:.2f}-{row['block_high']:.2f} | {row['loss_drift']:.1e} "
        f"| {saved} |"
    )


def print_phases(rows: dict, compare_env: dict | None = None) -> None:
    """The medians of each phase of the timed steps (the phases of one step need not add up
    to the step's median)."""
    print()
    print("| config | phase | minigrad ms | PyTorch ms | ratio |")
    print("|---|---|---|---|---|")
    for name, row in rows.items():
        arms = [(name, row)]
        if "parallel" in row:
            arms.append((f"{name}, DataParallel", row["parallel"]))
        if "compare" in row:
            arms.append((f"{name}, {env_label(compare_env or {})}", row["compare"]))
        for label, arm in arms:
            for phase, (ours, theirs) in arm["phases"].items():
                if theirs is None:
                    print(f"| {label} | {phase} | {ours:.2f} | - | - |")
                else:
                    ratio = f"{ours / theirs:.2f}x"
                    print(f"| {label} | {phase} | {ours:.2f} | {theirs:.2f} | {ratio} |")


# ---------------------------------------------------------------------------------------
# The workers' side: each imports its own framework only


MALLOC_SETTING = "TRAIN_STEP_MALLOC"  # how the script tells its workers --malloc


def keep_freed_memory() -> None:
    """glibc's mmap and trim thresholds raised as ``minigrad.fast.keep_freed_memory`` raises
    them, in either worker (written out here: the PyTorch worker does not import minigrad)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt(-3, 256 << 20)  # M_MMAP_THRESHOLD: requests up to 256 MiB from the heap
    mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: the heap keeps up to 1 GiB free at its top


def serve(framework: str) -> None:
    """A worker's loop: answer each message from stdin on the original stdout until stdin
    closes. Anything printed, by Python or a library, goes to stderr instead."""
    if os.environ.get(MALLOC_SETTING, "keep") == "keep":
        keep_freed_memory()
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    messages = sys.stdin.buffer
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C: end quietly, the script cleans up
    side = None
    while True:
        try:
            kind, *args = pickle.load(messages)
        except EOFError:  # the script is done with this worker
            sys.stderr.flush()
            os._exit(0)  # at once: the frameworks' threads and caches need no tidying up
        try:
            if kind == "hello":
                side = (MinigradSide if framework == "minigrad" else TorchSide)(*args)
                answer = ("ok", side.info())
            else:
                answer = ("ok", getattr(side, kind)(*args))
        except Exception:
            answer = ("error", traceback.format_exc())
        pickle.dump(answer, answers, protocol=pickle.HIGHEST_PROTOCOL)
        answers.flush()


class Side:
    """What both workers share: the built model's step functions, by arm ("plain",
    "parallel"), and the running of a block of them."""

    def __init__(self):
        self.steps, self.batches, self.phases, self.device = {}, [], False, "cpu"
        self.laps = []  # with phases, the ends of the phases of the step in progress

    def finish_step(self, loss, opt) -> float:
        """The rest of a step once the forward made ``loss``: backward and the optimizer's
        step, each phase's end noted (``lap``); the loss as a number."""
        self.lap()
        opt.zero_grad()
        loss.backward()
        self.lap()
        opt.step()
        self.sync()
        return loss.item()

    def lap(self) -> None:
        """With ``phases``, the end of a phase: once the device has finished it."""
        if self.phases:
            self.sync()
            self.laps.append(time.perf_counter())

    def sync(self) -> None:
        raise NotImplementedError

    def block(self, arm: str, start: int, stop: int) -> dict:
        """Steps ``start`` to ``stop`` (excluded) of ``arm``: each one's seconds, loss and,
        with phases, the seconds of its forward, backward and optimizer step."""
        step = self.steps[arm]
        seconds, losses, phases = [], [], []
        for x, y in self.batches[start:stop]:
            self.laps = []
            begin = time.perf_counter()
            losses.append(step(x, y))
            end = time.perf_counter()
            seconds.append(end - begin)
            if self.phases:
                ends = [begin, *self.laps, end]
                phases.append([b - a for a, b in zip(ends, ends[1:])])
        return {"seconds": seconds, "losses": losses, "phases": phases}

    def loaded(self) -> list:
        return sorted(name for name in ("minigrad", "torch") if name in sys.modules)


def set_minigrad_threads(mg, count: int) -> None:
    """minigrad on ``count`` threads (it uses at most two). With its helper thread off,
    minigrad leaves NumPy's BLAS to its own threads, so one thread also holds BLAS at one
    (PyTorch's count covers its BLAS)."""
    mg.set_num_threads(count)
    if count == 1:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")


def blas_threads():
    """The thread counts of the BLAS libraries loaded in this process (None if unknown)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    counts = sorted(
        {info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}
    )
    return "/".join(map(str, counts)) or None


class MinigradSide(Side):
    def __init__(self, threads: int | None):
        super().__init__()
        sys.path.insert(0, ROOT)
        import minigrad
        import minigrad.nn
        import minigrad.optim
        import models

        self.mg, self.models = minigrad, models
        if threads is not None:
            set_minigrad_threads(minigrad, threads)
        self.model = None

    def info(self) -> dict:
        return {
            "threads": self.mg.get_num_threads(),
            "blas": blas_threads(),
            "loaded": self.loaded(),
            "env": {key: value for key, value in os.environ.items() if key.startswith("MINIGRAD_")},
        }

    def sync(self) -> None:
        if self.device == "cuda":
            import cupy

            cupy.cuda.get_current_stream().synchronize()

    def build(self, spec: dict) -> dict:
        """The model of ``spec["config"]``, from ``spec["weights"]`` or from seed 0; returns
        its full config, its weights as NumPy arrays, and the bytes its graph saves."""
        mg, models = self.mg, self.models
        self.steps, self.model = {}, None  # the previous setting's, freed first
        self.batches, self.phases, self.device = spec["batches"], spec["phases"], spec["device"]
        mg.manual_seed(0)
        config = models.GPTConfig(**spec["config"])
        self.model = models.GPT(config).to(self.device)
        if spec["weights"] is not None:
            self.model.load_state_dict(spec["weights"])
        self.steps["plain"] = self.step_of(self.model)
        if spec["parallel"]:
            copy = models.GPT(config).to(self.device)
            copy.load_state_dict(self.model.state_dict())
            self.steps["parallel"] = self.step_of(copy, parallel=True)
        weights = {name: t.numpy().copy() for name, t in self.model.state_dict().items()}
        return {"config": asdict(config), "weights": weights, "saved": self.saved()}

    def step_of(self, model, parallel: bool = False):
        """A step of minigrad on ``model`` with an optimizer of its own; with ``parallel``,
        through nn.DataParallel, with the loss of the gathered logits."""
        mg, device = self.mg, self.device
        opt = mg.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        halves = mg.nn.DataParallel(model) if parallel else None
        next_token_loss = self.models.next_token_loss

        def step(x, y):
            xb, yb = mg.tensor(x, device=device), mg.tensor(y, device=device)
            if parallel:
                logits, _ = halves(xb)
                loss = next_token_loss(logits, yb)
            else:
                _, loss = model(xb, yb)
            return self.finish_step(loss, opt)

        return step

    def saved(self) -> int:
        """Bytes of the distinct arrays the graph of the first batch's loss keeps."""
        x, y = self.batches[0]
        _, loss = self.model(
            self.mg.tensor(x, device=self.device), self.mg.tensor(y, device=self.device)
        )
        return minigrad_saved_bytes(loss)


def minigrad_saved_bytes(loss) -> int:
    """Bytes of the distinct arrays the graph of ``loss`` keeps for backward."""
    seen, total = set(), 0
    stack, visited = [loss.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in visited:
            continue
        visited.add(id(node))
        for array in node.saved_arrays:  # (a saved ndarray's own .data is a memoryview)
            base = array
            while getattr(base, "base", None) is not None:
                base = base.base
            if hasattr(base, "nbytes") and id(base) not in seen:
                seen.add(id(base))
                total += base.nbytes
        stack.extend(getattr(arg, "grad_fn", None) for arg in node.inputs)
    return total


class TorchSide(Side):
    def __init__(self, threads: int | None):
        super().__init__()
        import torch

        self.torch = torch
        if threads is not None:
            torch.set_num_threads(threads)
        self.twin = None

    def info(self) -> dict:
        return {"threads": self.torch.get_num_threads(), "loaded": self.loaded()}

    def sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def build(self, spec: dict) -> None:
        """The tests' PyTorch twin of the GPT of ``spec["config"]``, with its weights."""
        from types import SimpleNamespace

        torch = self.torch
        sys.path.insert(0, os.path.join(ROOT, "tests"))  # the tests' PyTorch twins
        from torch_twins import TorchGPT

        self.steps, self.twin = {}, None
        self.batches, self.phases, self.device = spec["batches"], spec["phases"], spec["device"]
        twin = TorchGPT(SimpleNamespace(**spec["config"]))
        state = {name: torch.from_numpy(array) for name, array in spec["weights"].items()}
        twin.load_state_dict(state, strict=True)  # strict: the names agree
        self.twin = twin = twin.to(self.device)
        opt = torch.optim.AdamW(twin.parameters(), lr=1e-3, weight_decay=0.01)

        def step(x, y):
            xb = torch.from_numpy(x).to(self.device)
            yb = torch.from_numpy(y).to(self.device)
            _, loss = twin(xb, yb)
            return self.finish_step(loss, opt)

        self.steps["plain"] = step

    def saved(self) -> int:
        """Bytes of the distinct storages autograd saves for the first batch's backward."""
        torch = self.torch
        x, y = self.batches[0]
        storages = {}

        def pack(t):
            storage = t.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
            return t

        xb, yb = torch.from_numpy(x).to(self.device), torch.from_numpy(y).to(self.device)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            self.twin(xb, yb)
        return sum(storages.values())


if __name__ == "__main__":
    main()
