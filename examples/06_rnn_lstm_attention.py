"""06 - Gradient through time: RNN, LSTM and causal attention compared.

A loss on the last step of a sequence, L = <h_T, r>, sends a gradient back to every input x_t.
How much of it arrives, as a function of the distance T - 1 - t, is the whole story of why
the Transformer replaced recurrent networks:

* RNN, h_t = tanh(W_ih x_t + W_hh h_{t-1} + b): each step back multiplies the gradient by
  W_hh^T diag(tanh'), a factor below 1 at the usual init, so it vanishes exponentially.
* LSTM: the cell state c_t = f_t * c_{t-1} + i_t * g_t is a *gated shortcut*: one step back
  along it multiplies by the forget gate f_t. At PyTorch's default init f ~ sigmoid(0) = 0.5,
  so the gradient still halves every step; with the forget-gate bias set to 1 or 3 the gate
  opens (f ~ 0.73, 0.95) and the gradient travels far. A residual connection is this same
  shortcut with the gate fixed open at 1.
* A causal transformer: attention connects the last position to every earlier one in one
  step, so the distance hardly matters.

What to look at: the table of |dL/dx_t| against distance (geometric mean over seeds), and in
the figure the straight lines on the log axis (exponential decay) next to the flat one.
This runs ``minigrad.study.time`` at small settings; ``minigrad study time`` runs T = 64.

Run:  python examples/06_rnn_lstm_attention.py [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from minigrad import study
from minigrad.study.common import format_value
from minigrad.viz.studies import save_study

SETTINGS = dict(seeds=(0, 1), length=48, hidden=32, n_heads=4)
QUICK_SETTINGS = dict(seeds=(3, 4), length=12, hidden=8, n_heads=2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="examples/out", help="where the table and figure go")
    parser.add_argument("--quick", action="store_true", help="tiny settings (checks may fail)")
    args = parser.parse_args(argv)
    settings = QUICK_SETTINGS if args.quick else SETTINGS

    result = study.run("time", **settings)
    print(f"=== {result.title}  (T = {settings['length']}, hidden = {settings['hidden']})")
    print(f"claim: {result.claim}")
    print(result.table_markdown())
    print(result.checks_markdown())

    far = result.rows[-1]
    print(f"at distance {far['distance']}, |dL/dx_t| is:")
    for model in result.columns[1:]:
        print(f"   {model:32s} {format_value(far[model])}")
    print(f"study time: {'PASSED' if result.passed else 'FAILED'} in {result.seconds:.1f} s")
    for path in save_study(result, Path(args.out) / "06_time"):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
