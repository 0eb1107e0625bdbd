"""``minigrad.study``: experiments on how gradients flow through residual connections, and
on the claims made for attention (sqrt(d_k), heads, separate Q and K).

Each study is a function that measures, states its pass criterion, checks it, and returns a
``StudyResult`` (rows, checks, ``passed``, the curves it measured); ``result.write(out_dir)``
writes the Markdown and JSON tables. A study draws nothing: ``minigrad.viz.studies`` draws
its figure, and ``save_study(result, out_dir)`` there writes the tables and the figure. The
same studies run from the shell as ``minigrad study NAME``.

    depth   gradients at init vs depth, with and without shortcuts (MLP and transformer)
    ln      post-LN vs pre-LN: gradient norms per layer (Xiong et al. 2020), warm-up
    paths   gradient along paths of k branches (Veit et al. 2016)
    scale   scaled shortcuts lambda * x + F(x), and ReZero (He et al. 2016)
    time    gradient through time: RNN, LSTM (forget-gate bias), causal attention
    scaling scores divided by sqrt(d_k) or not: spread, saturation, gradient to Q at init
    heads   1, 2 or 4 heads at equal d_model on a task that needs two relations at once
    qk      separate W_Q, W_K against tied ones (symmetric scores) on a directional task
    sequential  RNN, LSTM and Transformer as T grows: steps in a row, saved bytes, time
    bottleneck  last-state LSTM, LSTM + attention, Transformer: accuracy against length
"""

from minigrad.study.bottleneck import bottleneck
from minigrad.study.common import Check, StudyResult
from minigrad.study.depth import depth
from minigrad.study.heads import heads
from minigrad.study.ln import ln
from minigrad.study.paths import paths
from minigrad.study.qk import qk
from minigrad.study.scale import scale
from minigrad.study.scaling import scaling
from minigrad.study.sequential import sequential
from minigrad.study.time import time

STUDIES = {"depth": depth, "ln": ln, "paths": paths, "scale": scale, "time": time}
STUDIES.update(scaling=scaling, heads=heads, qk=qk)
STUDIES.update(sequential=sequential, bottleneck=bottleneck)


def run(name: str, **options) -> StudyResult:
    """Run the study called ``name`` (one of ``STUDIES``) with its keyword options."""
    if name not in STUDIES:
        raise ValueError(f"minigrad.study: unknown study {name!r}; choose from {sorted(STUDIES)}")
    return STUDIES[name](**options)


__all__ = [
    "Check",
    "STUDIES",
    "StudyResult",
    "bottleneck",
    "depth",
    "heads",
    "ln",
    "paths",
    "qk",
    "run",
    "scale",
    "scaling",
    "sequential",
    "time",
]
