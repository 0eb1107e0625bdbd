"""minigrad.host_memory: glibc's malloc keeps freed memory for the next training step."""

import os
import platform
import subprocess
import sys

import pytest

from minigrad import host_memory

glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="mallopt is glibc's",
)

# Like a training step: 40 arrays of 1 MiB alive at once, then all freed; five times.
STEPS = """
import resource, numpy as np, minigrad
def step():
    arrays = [np.ones(1 << 18, np.float32) for _ in range(40)]
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def page_faults_of_five_steps(keep: str) -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # runs from a checkout
    env = {"MINIGRAD_KEEP_FREED_MEMORY": keep, "PYTHONPATH": root}
    run = subprocess.run([sys.executable, "-c", STEPS], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return int(run.stdout)


@glibc
def test_importing_minigrad_makes_repeated_steps_fault_no_pages():
    assert page_faults_of_five_steps("1") < 1000
    # glibc's defaults give each step's 40 MiB back to the OS: ~10,000 faults per step
    assert page_faults_of_five_steps("0") > 10_000


def test_the_environment_variable_turns_it_off(monkeypatch):
    monkeypatch.setenv("MINIGRAD_KEEP_FREED_MEMORY", "0")
    assert host_memory.keep_freed_memory() is False


@glibc
def test_it_reports_success_on_glibc(monkeypatch):
    monkeypatch.delenv("MINIGRAD_KEEP_FREED_MEMORY", raising=False)
    assert host_memory.keep_freed_memory() is True
