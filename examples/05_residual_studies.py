"""05 - What residual connections do to gradients: three studies from ``minigrad.study``.

Each study measures gradients at initialization, states beforehand what the published claim
predicts, and checks it (``StudyResult.checks``; ``passed`` counts the required ones). This
script runs them at small settings (seconds each); ``minigrad study NAME`` runs the full
versions whose tables and figures are in docs/.

What to look at:

* ``depth``: stack 1 to 24 layers with and without shortcuts. The tanh MLP's first-layer
  gradient vanishes without them (each layer multiplies it by diag(tanh') W^T) and holds
  with them (each factor becomes I + diag(tanh') W^T). In transformer blocks LayerNorm keeps
  the gradient's *norm* steady either way; what collapses without shortcuts is *rank*:
  "share" (the top singular value's share of the tokens' energy) reaches 1, every token the
  same vector, and the query gradient |dWq| vanishes while the value gradient does not.
* ``ln``: post-LN, Z = LayerNorm(X + F(X)), against pre-LN, X + F(LayerNorm(X)). The last
  layer's FFN gradient is flat in depth for post-LN and falls with depth for pre-LN
  (Xiong et al. 2020). The table also says plainly what does not show at this scale.
* ``paths``: a stack of n branches is 2^n paths; the gradient along a path falls
  exponentially with the number k of branches on it, so the gradient lives in short paths
  (Veit et al. 2016), even though most paths have length near n/2.

Run:  python examples/05_residual_studies.py [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from minigrad import study
from minigrad.viz.studies import save_study

# small enough to run in seconds, large enough that every required check holds
SETTINGS = {
    "depth": dict(seeds=(0,), depths=(1, 8, 24), d_model=32, n_heads=4, length=8, batch=1),
    "ln": dict(seeds=(0,), depths=(2, 4, 8), batches=1, d_model=32, n_heads=4, train_steps=0),
    "paths": dict(seeds=(0,), n_blocks=3, samples=4, d_model=32, n_heads=4, length=8, batch=1),
}
# tiny: every step runs, the numbers mean little (used by the tests)
QUICK_SETTINGS = {
    "depth": dict(seeds=(0,), depths=(1, 2), d_model=16, n_heads=2, length=4, batch=1),
    "ln": dict(seeds=(0,), depths=(1, 2), batches=1, d_model=16, n_heads=2, train_steps=0),
    "paths": dict(seeds=(0,), n_blocks=2, samples=2, d_model=16, n_heads=2, length=4, batch=1),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="examples/out", help="where tables and figures go")
    parser.add_argument("--quick", action="store_true", help="tiny settings (checks may fail)")
    args = parser.parse_args(argv)
    settings = QUICK_SETTINGS if args.quick else SETTINGS
    folder = Path(args.out) / "05_studies"

    for name, options in settings.items():
        start = time.perf_counter()
        result = study.run(name, **options)
        print(f"=== study {name}: {result.title}")
        print(f"claim: {result.claim}")
        print(result.table_markdown())
        print(result.checks_markdown())
        verdict = "PASSED" if result.passed else "FAILED"
        print(f"study {name}: {verdict} in {time.perf_counter() - start:.1f} s")
        for path in save_study(result, folder):  # the tables and the figure
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
