"""What a fused op stands for: the primitive ops it saves the graph from.

minigrad computes softmax, log_softmax, LayerNorm, cross-entropy and GELU as one node each,
with a hand-derived backward (see ``minigrad/ops``). A learner should still see what such a
node computes, so ``draw_graph(expand_fused=True)`` draws, next to each fused node, the chain
of primitive steps below (the same steps as the op's forward, and as the composite twins in
the tests). Each step is ``(name, what it computes, the names it reads)``; the inputs of the
fused op are named in ``INPUTS`` and the last step is its output.
"""

from __future__ import annotations

INPUTS = {
    "Softmax": ("x",),
    "LogSoftmax": ("x",),
    "LayerNorm": ("x", "gamma", "beta"),
    "CrossEntropy": ("logits", "targets"),
    "Gelu": ("x",),
}

RECIPES = {
    # y = e^(x - m) / sum_j e^(x_j - m)
    "Softmax": (
        ("m", "m = max_j x_j", ("x",)),
        ("shifted", "x - m", ("x", "m")),
        ("e", "e = exp(x - m)", ("shifted",)),
        ("total", "sum_j e_j", ("e",)),
        ("y", "y = e / sum_j e_j", ("e", "total")),
    ),
    # y = x - m - log sum_j e^(x_j - m)
    "LogSoftmax": (
        ("m", "m = max_j x_j", ("x",)),
        ("shifted", "s = x - m", ("x", "m")),
        ("e", "exp(s)", ("shifted",)),
        ("total", "sum_j exp(s_j)", ("e",)),
        ("log_total", "log", ("total",)),
        ("y", "y = s - log sum", ("shifted", "log_total")),
    ),
    # LayerNorm(x) = gamma * (x - mu) / sqrt(sigma^2 + eps) + beta
    "LayerNorm": (
        ("mu", "mu = mean(x)", ("x",)),
        ("centered", "x - mu", ("x", "mu")),
        ("variance", "sigma^2 = mean((x - mu)^2)", ("centered",)),
        ("rstd", "1 / sqrt(sigma^2 + eps)", ("variance",)),
        ("xhat", "xhat = (x - mu) * rstd", ("centered", "rstd")),
        ("y", "y = gamma * xhat + beta", ("xhat", "gamma", "beta")),
    ),
    # loss = mean_i (logsumexp(x_i) - x_i[t_i])
    "CrossEntropy": (
        ("log_probs", "log_softmax(logits)", ("logits",)),
        ("picked", "pick log_probs[i, t_i]", ("log_probs", "targets")),
        ("y", "loss = -mean(picked)", ("picked",)),
    ),
    # exact: y = x * Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2
    "Gelu": (
        ("scaled", "x / sqrt(2)", ("x",)),
        ("erf", "erf", ("scaled",)),
        ("cdf", "Phi = (1 + erf) / 2", ("erf",)),
        ("y", "y = x * Phi", ("x", "cdf")),
    ),
}

GELU_TANH = (
    # tanh form: y = x/2 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    ("cube", "x + 0.044715 x^3", ("x",)),
    ("inner", "u = sqrt(2/pi) * (...)", ("cube",)),
    ("tanh", "tanh(u)", ("inner",)),
    ("y", "y = x/2 * (1 + tanh u)", ("x", "tanh")),
)


def recipe_for(node) -> tuple:
    """The primitive steps of a fused node, or () for an op that is already primitive."""
    if node.name == "Gelu" and getattr(node, "approximate", "none") == "tanh":
        return GELU_TANH
    return RECIPES.get(node.name, ())


def input_names(node) -> tuple:
    return INPUTS.get(node.name, ())
