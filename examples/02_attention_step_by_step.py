"""02 - Attention step by step, on the sentence 사과 / 는 / 맛있다.

Every equation of self-attention, one line of minigrad each, with its shape and values:

    X = E + PE                       token embeddings plus the sinusoidal position signal
    Q = X W_Q,  K = X W_K,  V = X W_V
    S = Q K^T / sqrt(d_k)            how well each query matches each key
    A = softmax_row(S)               each row a probability distribution: rows sum to 1
    O = A V                          each token's new vector: a weighted mix of the values
    head_h = softmax(Q_h K_h^T / sqrt(d_k)) V_h,   O = Concat(head_1..head_H) W_O

What to look at: the shapes (T = 3 tokens, d_model = 8, 2 heads of d_k = 4), that each row of
A sums to 1, and at the end that ``nn.MultiHeadAttention`` with the same weights computes
exactly the same O and A: the module is these equations, nothing more. (nn.Linear stores W as
(out, in) and computes x W^T + b, as PyTorch does, so W_Q here is ``q_proj.weight.T``.)
The weights are untrained, so the attention pattern itself means nothing yet; example 04
shows a trained one.

Run:  python examples/02_attention_step_by_step.py [--out DIR]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn
from minigrad.viz.plots import plot_attention, save_figure

TOKENS = ["사과", "는", "맛있다"]
D_MODEL, N_HEADS = 8, 2


def show(name: str, tensor: mg.Tensor) -> None:
    """Print a tensor's shape and values (batch dimension dropped)."""
    values = tensor.numpy()[0] if tensor.shape[0] == 1 else tensor.numpy()
    print(f"{name}  shape {tuple(tensor.shape)}")
    print("    " + np.array2string(values, precision=3, suppress_small=True, prefix="    "))


def linear(x: mg.Tensor, layer: nn.Linear) -> mg.Tensor:
    """x W + b with W = layer.weight^T: the projection written out."""
    return x @ layer.weight.T + layer.bias


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="examples/out", help="where the heatmap goes")
    parser.add_argument("--quick", action="store_true", help="(already quick; accepted)")
    args = parser.parse_args(argv)
    np.set_printoptions(precision=3, suppress=True, linewidth=100)
    mg.manual_seed(0)

    # X = E + PE: one id per token, looked up, plus the position signal
    vocab = {token: i for i, token in enumerate(TOKENS)}
    idx = mg.tensor([[vocab[t] for t in TOKENS]])  # (1, T)
    embedding = nn.Embedding(len(vocab), D_MODEL)
    positions = nn.PositionalEncoding(max_len=16, d_model=D_MODEL)
    print(f"sentence: {' / '.join(TOKENS)}  ->  ids {idx.tolist()[0]}")
    E = embedding(idx)
    X = positions(E)
    show("E = Embedding(x)", E)
    show("PE[:T]", X - E)
    show("X = E + PE", X)

    attention = nn.MultiHeadAttention(D_MODEL, N_HEADS)
    d_k = D_MODEL // N_HEADS

    # Q = X W_Q, K = X W_K, V = X W_V
    Q = linear(X, attention.q_proj)
    K = linear(X, attention.k_proj)
    V = linear(X, attention.v_proj)
    show("Q = X W_Q", Q)
    print(f"K = X W_K  shape {tuple(K.shape)},  V = X W_V  shape {tuple(V.shape)}")

    # one head at a time: head h uses columns h*d_k .. (h+1)*d_k of Q, K and V
    heads, weights = [], []
    for h in range(N_HEADS):
        cols = slice(h * d_k, (h + 1) * d_k)
        Q_h, K_h, V_h = Q[:, :, cols], K[:, :, cols], V[:, :, cols]
        S = Q_h @ K_h.transpose(-2, -1) / math.sqrt(d_k)  # S = Q K^T / sqrt(d_k)
        A = F.softmax(S, dim=-1)  # A = softmax_row(S)
        O_h = A @ V_h  # O = A V
        print(f"--- head {h}: d_k = {d_k}")
        show(f"S_{h} = Q_{h} K_{h}^T / sqrt(d_k)", S)
        show(f"A_{h} = softmax_row(S_{h})", A)
        row_sums = A.sum(dim=-1).numpy()[0]
        print(f"row sums of A_{h}: {row_sums}  (all 1: {np.allclose(row_sums, 1.0)})")
        show(f"head_{h} = A_{h} V_{h}", O_h)
        heads.append(O_h)
        weights.append(A)

    # O = Concat(head_1..head_H) W_O
    concat = mg.cat(heads, dim=-1)
    show("Concat(heads)", concat)
    O = linear(concat, attention.o_proj)
    show("O = Concat(heads) W_O", O)

    # the module, same weights, same input
    O_module = attention(X)
    A_by_hand = mg.stack(weights, dim=1).numpy()  # (1, H, T, T)
    output_error = np.abs(O_module.numpy() - O.numpy()).max()
    weight_error = np.abs(attention.attn_weights.numpy() - A_by_hand).max()
    print("nn.MultiHeadAttention with the same weights:")
    print(f"   max |O_module - O_by_hand| = {output_error:.1e}")
    print(f"   max |attn_weights - A_by_hand| = {weight_error:.1e}")
    print(f"   same: {output_error < 1e-5 and weight_error < 1e-6}")

    figure = plot_attention(A_by_hand, TOKENS, title="A = softmax(QK^T / sqrt(d_k)), untrained")
    path = save_figure(figure, Path(args.out) / "02_attention.png")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
