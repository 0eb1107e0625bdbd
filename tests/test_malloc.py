"""minigrad.fast.malloc: glibc's malloc keeps freed memory for the next training step, but
only when asked (``keep_freed_memory()``): importing minigrad leaves malloc as it was.

Each case runs in a fresh process, since the setting cannot be undone, and is read off what
it does: page faults over training-like steps (glibc's defaults give each step's memory
back to the OS and fault it in again)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from minigrad.fast import malloc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="mallopt is glibc's",
)

# Like a training step: 40 arrays of 1 MiB alive at once, then all freed; five times.
STEPS = """
import json, resource, numpy as np
import minigrad, minigrad.nn, minigrad.optim
kept = {call}
def step():
    arrays = [np.ones(1 << 18, np.float32) for _ in range(40)]
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    step()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({{"kept": kept, "faults": faults}}))
"""

FEW_FAULTS = 1000  # kept memory: the five steps fault in (next to) nothing
MANY_FAULTS = 10_000  # glibc's defaults: ~10,000 faults per step of 40 MiB


def five_steps(call: str = "None", **env) -> dict:
    """In a fresh process: ``import minigrad``, then ``call``, then five steps."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MINIGRAD_")}
    clean["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, clean.get("PYTHONPATH")]))
    code = STEPS.format(call=call)
    run = subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@glibc
def test_importing_minigrad_leaves_malloc_as_it_was():
    # (were mallopt called on import, these steps would fault as few pages as the next test's)
    assert five_steps()["faults"] > MANY_FAULTS


@glibc
def test_keep_freed_memory_makes_repeated_steps_fault_no_pages():
    result = five_steps("minigrad.fast.keep_freed_memory()")
    assert result == {"kept": True, "faults": result["faults"]}
    assert result["faults"] < FEW_FAULTS


@glibc
def test_the_environment_variable_makes_it_a_no_op():
    result = five_steps("minigrad.fast.keep_freed_memory()", MINIGRAD_KEEP_FREED_MEMORY="0")
    assert result["kept"] is False
    assert result["faults"] > MANY_FAULTS


def test_the_environment_variable_turns_it_off_in_this_process(monkeypatch):
    monkeypatch.setenv("MINIGRAD_KEEP_FREED_MEMORY", "0")
    assert malloc.keep_freed_memory() is False  # (and so changes nothing here)


def test_it_is_the_fast_layers_setting():
    import minigrad as mg

    assert mg.fast.keep_freed_memory is malloc.keep_freed_memory
