"""No surprises in the user's process: importing minigrad changes nothing in it, and after
minigrad has worked (its helper thread included) and rested a moment, the process burns no
CPU and has its settings back: Python's switch interval, BLAS's thread counts, the CPUs its
threads may run on.

Each case runs in a fresh Python process (minigrad's settings are process-wide), without
MINIGRAD_* in its environment, and prints what it saw as JSON for the test to judge."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

from minigrad.fast import threads

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IDLE_CPU_SECONDS = 0.05  # the most CPU time a resting process may use in 2 s (2.5%)

# What the process looks like; numpy and threadpoolctl are loaded before minigrad, so BLAS
# is there to be seen before the import.
PRELUDE = """
import json, os, sys, threading, time
import numpy as np
from threadpoolctl import threadpool_info


def blas_threads():
    return sorted(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


def thread_affinities():
    # every thread of the process, native ones (BLAS's workers) too: the CPUs it may use
    found = set()
    for task in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else []:
        try:
            found.add(tuple(sorted(os.sched_getaffinity(int(task)))))
        except OSError:  # the thread has ended meanwhile
            pass
    return sorted(found)


def state():
    return {
        "switch interval": sys.getswitchinterval(),
        "blas threads": blas_threads(),
        "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "thread affinities": thread_affinities(),
    }


def idle_cpu_seconds():
    # after a rest of 1 s, the CPU time of the whole process (all its threads) over 2 s
    time.sleep(1)
    start = time.process_time()
    time.sleep(2)
    return time.process_time() - start


def report(**seen):
    print(json.dumps(seen))


before = state()
python_threads_before = threading.active_count()
"""

# The former spinning-forever bug: a helper made and never given a task spun on its core.
DATA_PARALLEL = """
import minigrad as mg
from minigrad import nn
from minigrad.fast import threads

model = nn.Linear(4, 4)
x = mg.randn({batch}, 4, requires_grad=True)
out = nn.DataParallel(model)(x)
if {backward}:
    out.sum().backward()
    assert model.weight.grad is not None
threads.helper()  # made, and given no task
cpu = idle_cpu_seconds()
report(before=before, after=state(), cpu=cpu)
"""

TRAINING = """
import minigrad as mg
from minigrad import optim
from minigrad.fast import threads
from models import GPT, GPTConfig

mg.manual_seed(0)
config = GPTConfig(
    vocab_size=64, block_size=64, d_model=128, n_heads=4, n_layers=2, activation="gelu_tanh"
)
model = GPT(config)
optimizer = optim.AdamW(model.parameters(), lr=1e-3)
for step in range({steps}):
    tokens = mg.randint(0, 64, (16, 65))
    _, loss = model(tokens[:, :-1], tokens[:, 1:])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if threads.get_num_threads() == 2:  # (one CPU: no helper, by design)
    assert threads._helper is not None, "the helper thread was never made: too small a model"
cpu = idle_cpu_seconds()
report(
    before=before,
    after=state(),
    cpu=cpu,
    loss=loss.item(),
    helper_runs=threads._helper._runs if threads._helper is not None else 0,
)
"""


def in_a_fresh_process(code: str) -> dict:
    """What the fresh process running PRELUDE + ``code`` reported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINIGRAD_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    script = PRELUDE + textwrap.dedent(code)
    run = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def assert_settings_given_back(seen: dict) -> None:
    # the switch interval, BLAS's thread counts, the CPUs of the process and of each thread
    assert seen["after"] == seen["before"]


def assert_resting(seen: dict) -> None:
    assert seen["cpu"] <= IDLE_CPU_SECONDS, (
        f"the resting process used {seen['cpu']:.3f} s of CPU in 2 s: something spins"
    )


def helper_is_testable() -> bool:
    """Whether the helper can spin here (Linux's C library with spin locks, two CPUs)."""
    two_cpus = hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) >= 2
    return sys.platform.startswith("linux") and threads._SPIN_LOCK is not None and two_cpus


@pytest.mark.parametrize(
    "imports",
    ["import minigrad", "import minigrad, minigrad.nn, minigrad.optim, models"],
    ids=["minigrad", "with nn, optim and models"],
)
def test_importing_minigrad_changes_nothing_in_the_process(imports):
    seen = in_a_fresh_process(
        f"""
        {imports}
        report(before=before, after=state(),
               python_threads=[python_threads_before, threading.active_count()])
        """
    )
    assert seen["after"] == seen["before"]
    assert seen["python_threads"][1] == seen["python_threads"][0], "a thread was started"


@pytest.mark.parametrize(
    "batch, backward",
    [(1, False), (1, True), (8, True)],
    ids=["forward", "forward and backward", "both halves of a batch"],
)
def test_after_data_parallel_and_an_idle_helper_the_process_rests(batch, backward):
    seen = in_a_fresh_process(DATA_PARALLEL.format(batch=batch, backward=backward))
    assert_resting(seen)
    assert_settings_given_back(seen)


def test_after_training_a_gpt_the_process_rests_with_its_settings_back():
    seen = in_a_fresh_process(TRAINING.format(steps=150))
    assert math.isfinite(seen["loss"])  # the training ran
    assert_resting(seen)
    assert_settings_given_back(seen)
    if not helper_is_testable():
        pytest.skip("no spinning helper here (no spin locks, not Linux, or one CPU)")
    assert seen["helper_runs"] > 0, "training never handed work to the helper"
