"""``minigrad.study``: experiments on how gradients flow through residual connections.

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
"""

from minigrad.study.common import Check, StudyResult
from minigrad.study.depth import depth
from minigrad.study.ln import ln
from minigrad.study.paths import paths
from minigrad.study.scale import scale
from minigrad.study.time import time

STUDIES = {"depth": depth, "ln": ln, "paths": paths, "scale": scale, "time": time}


def run(name: str, **options) -> StudyResult:
    """Run the study called ``name`` (one of ``STUDIES``) with its keyword options."""
    if name not in STUDIES:
        raise ValueError(f"minigrad.study: unknown study {name!r}; choose from {sorted(STUDIES)}")
    return STUDIES[name](**options)


__all__ = [
    "Check",
    "STUDIES",
    "StudyResult",
    "depth",
    "ln",
    "paths",
    "run",
    "scale",
    "time",
]
