"""08 - The claims of the Transformer write-ups, measured: sqrt(d_k), heads, separate Q and K.

The write-ups make claims a learner can run and see. Each study of ``minigrad.study``
measures one, states beforehand what would confirm it (its criterion), and keeps every
number, passed or not; where a claim does not show at this toy scale, the table says so.
This script prints each claim as the write-up states it, then what was measured.

What to look at:

* ``scaling``: "Scores are divided by sqrt(d_k)." Without the division the scores' spread
  grows as sqrt(d_k), each row's softmax puts nearly all its weight on one key, and the
  gradient of the typical row vanishes on its way back to Q. With it nothing depends on d_k.
* ``heads``: "with a single attention head, averaging inhibits this". A task that needs the
  tokens one back and three back at once: several heads each take one, a single head has to
  split its weight between them (see the column of weights).
* ``qk``: "Q and K are separate matrices because influence between tokens is not
  symmetric". With W_Q = W_K the scores are symmetric, S = S^T, exactly; on "output the
  token to your left" that costs accuracy.

Run:  python examples/08_seed_claims.py [--quick] [--out DIR]
      (the defaults take about a minute on 2 cores; --quick a few seconds, and its numbers
      mean little)
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from minigrad import study
from minigrad.viz.studies import save_study

CLAIMS = {
    "scaling": (
        "Scores are divided by sqrt(d_k). Without scaling, softmax saturates and that "
        "gradient vanishes as d_k grows."
    ),
    "heads": (
        'One head would average different relations away ("with a single attention head, '
        'averaging inhibits this"), so there are H heads of size d/H.'
    ),
    "qk": (
        "Q and K are separate matrices because influence between tokens is not symmetric: "
        "는 shapes 사과, but not the other way round."
    ),
}
# each study's own defaults: about a minute for all three on 2 cores
DEFAULTS = {"scaling": {}, "heads": {}, "qk": {}}
# seconds: every step runs, the trained numbers mean little (used by the tests)
QUICK_SETTINGS = {
    "scaling": dict(seeds=(0,), d_ks=(4, 64, 1024), length=16, batch=4),
    "heads": dict(seeds=(0,), steps=40, every=10),
    "qk": dict(seeds=(0,), steps=40),
}


def measured_scaling(result) -> str:
    """Smallest and largest d_k, without and with the division."""
    plain = [r for r in result.rows if not r["scaled"]]
    scaled = [r for r in result.rows if r["scaled"]]
    first, last = plain[0]["d_k"], plain[-1]["d_k"]

    def span(rows, key):
        return f"{rows[0][key]:.3g} -> {rows[-1][key]:.3g}"

    return (
        f"d_k {first} -> {last}, without sqrt(d_k): std(S) {span(plain, 'std(S)')} "
        f"(sqrt ratio {math.sqrt(last / first):.3g}x), largest weight {span(plain, 'max A')}, "
        f"median |dL/dQ_i| {span(plain, 'median |dL/dQ_i|')}; with it: std(S) "
        f"{span(scaled, 'std(S)')}, median |dL/dQ_i| {span(scaled, 'median |dL/dQ_i|')}"
    )


def measured_heads(result) -> str:
    """Accuracy and steps to 99% for each number of heads."""
    parts = [
        f"{r['heads']} head(s): accuracy {r['final accuracy']:.3f}, "
        f"steps to 99% {r['mean steps to 99%'] if r['runs at 99%'] else 'never'}"
        for r in result.rows
    ]
    return "; ".join(parts)


def measured_qk(result) -> str:
    """Accuracy and asymmetry for separate and tied W_Q, W_K."""
    return "; ".join(
        f"{r['W_K']} W_K: accuracy {r['accuracy']:.3f}, weight on left/right/self "
        f"{r['A to left']:.2f}/{r['A to right']:.2f}/{r['A to self']:.2f}, "
        f"||S - S^T|| / ||S|| = {r['||S - S^T|| / ||S||']:.3g}"
        for r in result.rows
    )


def measured(result) -> str:
    """What a study measured, in one line."""
    describe = {"scaling": measured_scaling, "heads": measured_heads, "qk": measured_qk}
    return describe[result.name](result)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="examples/out", help="where tables and figures go")
    parser.add_argument("--quick", action="store_true", help="tiny settings (checks may fail)")
    args = parser.parse_args(argv)
    settings = QUICK_SETTINGS if args.quick else DEFAULTS
    folder = Path(args.out) / "08_claims"

    for name, options in settings.items():
        start = time.perf_counter()
        result = study.run(name, **options)
        print(f"=== study {name}: {result.title}")
        print(f"claim: {CLAIMS[name]}")
        print(f"measured: {measured(result)}")
        print(result.table_markdown())
        print(result.checks_markdown())
        for note in result.notes:
            print(f"- {note}")
        verdict = "PASSED" if result.passed else "FAILED"
        print(f"study {name}: {verdict} in {time.perf_counter() - start:.1f} s")
        for path in save_study(result, folder):  # the tables and the figure
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
