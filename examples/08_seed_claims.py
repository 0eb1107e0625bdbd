"""08 - The claims of the RNN/LSTM and Transformer write-ups, measured: five studies.

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
* ``sequential``: "RNNs and LSTMs process tokens in order, so they cannot be parallelised".
  The chain of ops an LSTM's backward must walk grows with T; a Transformer's does not. The
  LSTM's gates cost it memory and time against a plain RNN.
* ``bottleneck``: "an LSTM encoder-decoder passes on only its last hidden state, so
  information is lost". Accuracy against length for the last-state LSTM, the same with
  attention over the encoder states, and the Transformer encoder-decoder.

Run:  python examples/08_seed_claims.py [--quick] [--out DIR]
      (the defaults take a few minutes on 2 cores, most of it bottleneck's training;
      --quick a few seconds, and its numbers mean little)
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from minigrad import study
from minigrad.viz.studies import save_study
from models.data.translate import sentence_pairs

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
    "sequential": (
        "RNNs and LSTMs process tokens in order, so they cannot be parallelised, and "
        "training is slow. The gates cost memory and compute."
    ),
    "bottleneck": (
        "In machine translation, an LSTM encoder-decoder passes on only its last hidden "
        "state, so information is lost. Attention was introduced to fix that, and the "
        "Transformer keeps only attention."
    ),
}
# each study's own defaults (bottleneck also on the translate task, as `minigrad study` runs it)
DEFAULTS = {
    "scaling": {},
    "heads": {},
    "qk": {},
    "sequential": {},
    "bottleneck": dict(extra_tasks={"translate": sentence_pairs}),
}
# seconds: every step runs, the trained numbers mean little (used by the tests)
QUICK_SETTINGS = {
    "scaling": dict(seeds=(0,), d_ks=(4, 64, 1024), length=16, batch=4),
    "heads": dict(seeds=(0,), steps=40, every=10),
    "qk": dict(seeds=(0,), steps=40),
    "sequential": dict(lengths=(4, 8, 16), width=8, layers=2, n_heads=2, batch=2, repeats=1),
    "bottleneck": dict(
        lengths=(2, 4),
        extra_tasks={"translate": sentence_pairs},
        extra_lengths=(2, 3),
        width=8,
        steps=3,
        batch=4,
        sentences=20,
        test=6,
    ),
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


def measured_sequential(result) -> str:
    """Graph depth, saved memory and step time at the shortest and the longest T."""
    lengths = sorted({r["T"] for r in result.rows})
    first, last = lengths[0], lengths[-1]

    def span(model, key):
        values = {r["T"]: r[key] for r in result.rows if r["model"] == model}
        return f"{values[first]:.3g} -> {values[last]:.3g}"

    models = dict.fromkeys(r["model"] for r in result.rows)
    return f"T {first} -> {last}: " + "; ".join(
        f"{m} graph depth {span(m, 'graph depth')}, saved KB {span(m, 'saved KB')}, "
        f"step ms {span(m, 'step ms')}"
        for m in models
    )


def measured_bottleneck(result) -> str:
    """Token accuracy at the shortest and the longest length, per task and model."""
    parts = []
    for task in dict.fromkeys(r["task"] for r in result.rows):
        rows = [r for r in result.rows if r["task"] == task]
        first, last = min(r["length"] for r in rows), max(r["length"] for r in rows)
        accuracy = {(r["model"], r["length"]): r["token acc"] for r in rows}
        models = dict.fromkeys(r["model"] for r in rows)
        spans = ", ".join(
            f"{m} {accuracy[m, first]:.2f} -> {accuracy[m, last]:.2f}" for m in models
        )
        parts.append(f"{task}, length {first} -> {last}: {spans}")
    return "; ".join(parts)


def measured(result) -> str:
    """What a study measured, in one line."""
    describe = {
        "scaling": measured_scaling,
        "heads": measured_heads,
        "qk": measured_qk,
        "sequential": measured_sequential,
        "bottleneck": measured_bottleneck,
    }
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
