"""Name graph nodes after the Transformer equations they compute, where that is recognisable.

    Q = X W_Q,  K = X W_K,  V = X W_V
    S = Q K^T / sqrt(d_k),  A = softmax(S),  O = A V,  O W_O
    Z = LayerNorm(X + O)            (post-LN "Add & Norm")
    X_i = Embedding(x_i) + PE_i

Recognised from module types and names (a ``MultiHeadAttention`` call and its ``q_proj`` ..
``o_proj``, a ``FeedForward``) and from the shortcuts found in the graph; anything else
keeps its plain op name. The labels are for reading only: nothing depends on them.
"""

from __future__ import annotations

from minigrad.tensor import Tensor
from minigrad.viz.modules import CallTree

PROJECTIONS = {
    "q_proj": "Q = X W_Q",
    "k_proj": "K = X W_K",
    "v_proj": "V = X W_V",
    "o_proj": "O = Concat(heads) W_O",
}
# ops that may sit between the scores Q K^T and the softmax (scale, mask) or after it
_PASS_THROUGH = ("Mul", "Div", "Where", "Add", "Dropout")


def equation_labels(tree: CallTree, shortcuts: list) -> dict:
    """id(node) -> the equation it computes, for the nodes that can be named."""
    labels: dict = {}
    for call in tree.calls():
        last_name = call.name.rsplit(".", 1)[-1]
        if last_name in PROJECTIONS and len(call.own_nodes) == 1 and not call.children:
            labels[id(call.own_nodes[0])] = PROJECTIONS[last_name]
        if call.type_name.endswith("Attention"):
            labels.update(_attention_labels(call.own_nodes))
        if call.type_name == "FeedForward":
            labels.update(_activation_labels(call.own_nodes))
    labels.update(_embedding_sum_label(tree))
    labels.update(_residual_labels(tree, shortcuts))
    return labels


def _attention_labels(nodes: list) -> dict:
    """S = QK^T/sqrt(d_k), A = softmax(S), O = AV inside one attention call."""
    labels = {}
    for softmax in (node for node in nodes if node.name == "Softmax"):
        labels[id(softmax)] = "A = softmax(S)"
        step = _producer(softmax, 0)
        first = True
        while step is not None and step.name in _PASS_THROUGH:
            masked = " (masked)" if step.name in ("Where", "Add") else ""
            if first:
                labels[id(step)] = "S = QK^T/sqrt(d_k)" + masked
                first = False
            step = _producer(step, 0)
        if step is not None and step.name == "Matmul":
            labels.setdefault(id(step), "QK^T" if not first else "S = QK^T/sqrt(d_k)")
            scaled = _producer(step, 0)  # the queries, scaled before the product
            if scaled is not None and scaled.name == "Mul":
                labels.setdefault(id(scaled), "Q/sqrt(d_k)")
        for node in nodes:
            if node.name == "Matmul" and _reads(node, softmax):
                labels[id(node)] = "O = AV  (head_h = A_h V_h)"
    return labels


def _activation_labels(nodes: list) -> dict:
    return {id(node): f"{node.name.upper()}(H)" for node in nodes if node.name in ("Gelu", "Relu")}


def _embedding_sum_label(tree: CallTree) -> dict:
    """X_i = Embedding(x_i) + PE_i: an Add of two embedding lookups."""
    labels = {}
    for call in tree.calls():
        for node in call.own_nodes:
            producers = (_producer(node, 0), _producer(node, 1))
            if node.name == "Add" and all(
                p is not None and p.name == "Embedding" for p in producers
            ):
                labels[id(node)] = "X_i = Embedding(x_i) + PE_i"
    return labels


def _residual_labels(tree: CallTree, shortcuts: list) -> dict:
    """X + O and X + FFN(X) at each shortcut; Z = LayerNorm(X + O) right after it, when that
    LayerNorm (in the same block) is the sum's only reader (post-LN: Z replaces X + O; a
    pre-LN block reads the sum but keeps it as the residual stream)."""
    readers: dict = {}  # id(tensor) -> the nodes that read it
    for call in tree.calls():
        for node in call.own_nodes:
            for arg in node.inputs:
                readers.setdefault(id(arg), []).append(node)
    labels = {}
    for shortcut in shortcuts:
        kind = _branch_kind(tree, shortcut.branch)
        labels[id(shortcut.node)] = f"X + {kind}  (shortcut)"
        (norm, *others) = readers.get(id(shortcut.out), [None])
        if norm is None or others or norm.name != "LayerNorm":
            continue
        norm_call, add_call = tree.owner_of(norm), tree.owner_of(shortcut.node)
        if norm_call is add_call or (norm_call is not None and norm_call.parent is add_call):
            labels[id(norm)] = f"Z = LayerNorm(X + {kind})"
    return labels


def _branch_kind(tree: CallTree, branch: Tensor) -> str:
    """O for an attention branch, FFN(X) for a feed-forward one, F(X) otherwise."""
    call = tree.owner_of(branch.grad_fn) if branch.grad_fn is not None else None
    while call is not None:
        if call.type_name.endswith("Attention"):
            return "O"
        if call.type_name == "FeedForward":
            return "FFN(X)"
        call = call.parent
    return "F(X)"


def _producer(node, position: int):
    if position >= len(node.inputs) or not isinstance(node.inputs[position], Tensor):
        return None
    return node.inputs[position].grad_fn


def _reads(node, source) -> bool:
    """Whether ``node`` reads the output of ``source``, directly or through a dropout."""
    for arg in node.inputs:
        producer = arg.grad_fn if isinstance(arg, Tensor) else None
        if producer is source:
            return True
        if producer is not None and producer.name == "Dropout" and _producer(producer, 0) is source:
            return True
    return False
