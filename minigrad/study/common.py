"""What every study shares: its result (rows, checks, pass/fail), and writing it out.

A study measures something about gradients, states in advance what the published claim
predicts (its *criterion*), checks it, and keeps every number it measured, passed or not.
``StudyResult.write(out_dir)`` writes ``study_<name>.md`` (a Markdown table) and
``study_<name>.json``. A study draws nothing: ``minigrad.viz.studies`` turns its result
into the figure ``<name>.png``.

Checks marked ``required=False`` report a published result that the study measures but does
not count towards ``passed``: where a claim does not show at toy scale, the table says so
instead of the experiment being bent until it passes.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import minigrad as mg


@dataclass
class Check:
    """One stated expectation and what was measured against it."""

    name: str
    measured: float | str
    expected: str
    passed: bool
    required: bool = True

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "measured": self.measured,
            "expected": self.expected,
            "passed": bool(self.passed),
            "required": self.required,
        }


def below(name: str, measured: float, limit: float, why: str = "", required: bool = True) -> Check:
    """The check ``measured < limit``; ``why`` says in words what that means."""
    expected = f"< {limit:g}" + (f" ({why})" if why else "")
    return Check(name, measured, expected, bool(measured < limit), required)


def above(name: str, measured: float, limit: float, why: str = "", required: bool = True) -> Check:
    """The check ``measured > limit``; ``why`` says in words what that means."""
    expected = f"> {limit:g}" + (f" ({why})" if why else "")
    return Check(name, measured, expected, bool(measured > limit), required)


@dataclass
class StudyResult:
    """The outcome of one study: the table, the checks, and whether the criterion held.

    ``curves`` holds the measurements too long for the table, label -> one value per
    distance or per training step (the table samples them); the figure draws them.
    """

    name: str
    title: str
    claim: str
    criterion: str
    columns: list[str]
    rows: list[dict]
    checks: list[Check]
    settings: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    curves: dict[str, list[float]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks if check.required)

    def table_markdown(self) -> str:
        header = "| " + " | ".join(_cell(c) for c in self.columns) + " |"
        rule = "|" + "|".join("---" for _ in self.columns) + "|"
        lines = [header, rule]
        for row in self.rows:
            cells = (_cell(format_value(row.get(column, ""))) for column in self.columns)
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def checks_markdown(self) -> str:
        lines = ["| check | measured | expected | result |", "|---|---|---|---|"]
        for check in self.checks:
            verdict = "pass" if check.passed else "FAIL"
            if not check.required:
                verdict += " (reported, not required)"
            lines.append(
                f"| {_cell(check.name)} | {_cell(format_value(check.measured))} | "
                f"{_cell(check.expected)} | "
                f"{verdict} |"
            )
        return "\n".join(lines)

    def to_markdown(self) -> str:
        verdict = "PASSED" if self.passed else "FAILED"
        settings = ", ".join(f"{k}={v}" for k, v in self.settings.items())
        parts = [
            f"## Study `{self.name}`: {self.title}",
            "",
            f"**Claim.** {self.claim}",
            "",
            f"**Criterion.** {self.criterion}",
            "",
            f"**Result: {verdict}** ({self.seconds:.1f} s; {settings})",
            "",
            self.table_markdown(),
            "",
            self.checks_markdown(),
        ]
        if self.notes:
            parts += ["", *[f"- {note}" for note in self.notes]]
        return "\n".join(parts) + "\n"

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "title": self.title,
            "claim": self.claim,
            "criterion": self.criterion,
            "passed": self.passed,
            "seconds": round(self.seconds, 3),
            "settings": {k: _jsonable(v) for k, v in self.settings.items()},
            "columns": self.columns,
            "rows": [{k: _jsonable(v) for k, v in row.items()} for row in self.rows],
            "checks": [check.to_dict() for check in self.checks],
            "notes": self.notes,
        }

    def write(self, out_dir: str | Path) -> list[Path]:
        """Write ``study_<name>.md`` and ``study_<name>.json``; return their paths."""
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        markdown = out_dir / f"study_{self.name}.md"
        markdown.write_text(self.to_markdown(), encoding="utf-8")
        table = out_dir / f"study_{self.name}.json"
        table.write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n")
        return [markdown, table]

    def __str__(self) -> str:
        return self.to_markdown()


def _cell(text: str) -> str:
    """A Markdown table cell: a literal "|" (as in |dL/dW|) must be escaped."""
    return str(text).replace("|", "\\|")


def _jsonable(value):
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else str(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def format_value(value) -> str:
    """Numbers with 3 significant digits; tiny or huge ones in scientific notation."""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if value == 0.0 or not math.isfinite(value):
            return str(value)
        if abs(value) < 1e-3 or abs(value) >= 1e4:
            return f"{value:.2e}"
        return f"{value:.3g}"
    return str(value)


# -- helpers the studies share ---------------------------------------------------------------


def timed(study: Callable[..., StudyResult]) -> Callable[..., StudyResult]:
    """Record in ``result.seconds`` how long a study took."""

    @functools.wraps(study)
    def run(*args, **kwargs) -> StudyResult:
        start = time.perf_counter()
        result = study(*args, **kwargs)
        result.seconds = time.perf_counter() - start
        return result

    return run


def random_input(shape: Sequence[int], dtype=np.float64, requires_grad: bool = True):
    """A standard normal leaf tensor drawn from minigrad's seeded generator."""
    return mg.randn(*shape, dtype=dtype, requires_grad=requires_grad)


def mean_over(values: Sequence[float], geometric: bool = False) -> float:
    """The mean over seeds; ``geometric`` for quantities that span many decades."""
    values = np.asarray(values, dtype=np.float64)
    if geometric:
        return float(np.exp(np.mean(np.log(np.maximum(values, 1e-300)))))
    return float(np.mean(values))


def linear_fit(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float]:
    """Least-squares line y = slope * x + intercept; returns (slope, intercept, R^2)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    total = ((y - y.mean()) ** 2).sum()
    r2 = 1.0 - (residual**2).sum() / total if total > 0 else 1.0
    return float(slope), float(intercept), float(r2)
