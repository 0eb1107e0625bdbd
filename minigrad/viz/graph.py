"""The computation graph behind a tensor, walked once and laid out flat for the drawing tools.

A tensor made by an op points to its graph node (``t.grad_fn``, a ``Context``), whose
``inputs`` are the tensors the op read. Following those links from an output reaches every
node and every leaf the output depends on. ``collect_graph`` does that walk iteratively (an
explicit stack, so graphs of 10^5 nodes need no recursion) and returns the nodes in the order
their ops ran: a node's ``seq`` number is given when it is created, after its inputs exist,
so sorting by ``seq`` is a topological order (inputs before the ops that read them).

An *edge* is one input slot of one node: the tensor ``inputs[position]`` flowing into
``head``. In backward, the gradient flows along the same edge the other way, and inside
``viz.record_grads()`` the engine keeps its norm in ``head.edge_grad_norms[position]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minigrad.autograd.function import Context
from minigrad.tensor import Tensor


@dataclass(frozen=True, eq=False)
class Edge:
    """``tensor`` flows into input slot ``position`` of the node ``head``."""

    tensor: Tensor
    head: Context
    position: int

    @property
    def tail(self) -> Context | None:
        """The node that made ``tensor`` (None for a leaf: a parameter, an input, a constant)."""
        return self.tensor.grad_fn

    @property
    def grad_norm(self) -> float | None:
        """Norm of the gradient that the last recorded backward sent along this edge."""
        norms = self.head.edge_grad_norms
        return None if norms is None else norms[self.position]


@dataclass(eq=False)
class Graph:
    """Everything ``output`` depends on: its nodes in run order, its leaves, its edges."""

    output: Tensor
    nodes: list = field(default_factory=list)  # Contexts, sorted by seq (inputs first)
    leaves: list = field(default_factory=list)  # Tensors without grad_fn, in first-use order
    edges: list = field(default_factory=list)  # Edges, grouped by head in node order

    def consumers(self) -> dict:
        """id(tensor) -> the edges that read that tensor."""
        readers: dict = {}
        for edge in self.edges:
            readers.setdefault(id(edge.tensor), []).append(edge)
        return readers

    @property
    def has_grads(self) -> bool:
        """Whether a backward inside ``record_grads()`` has labelled these edges."""
        return any(node.edge_grad_norms is not None for node in self.nodes)


def collect_graph(output: Tensor) -> Graph:
    """Walk back from ``output`` to every node and leaf it depends on (no recursion)."""
    graph = Graph(output)
    if output.grad_fn is None:
        graph.leaves.append(output)
        return graph
    seen_nodes = {id(output.grad_fn)}
    stack = [output.grad_fn]
    while stack:
        node = stack.pop()
        graph.nodes.append(node)
        for arg in node.inputs:
            parent = arg.grad_fn if isinstance(arg, Tensor) else None
            if parent is not None and id(parent) not in seen_nodes:
                seen_nodes.add(id(parent))
                stack.append(parent)
    graph.nodes.sort(key=lambda node: node.seq)

    seen_leaves = set()
    for node in graph.nodes:
        for position, arg in enumerate(node.inputs):
            if not isinstance(arg, Tensor):
                continue  # a constant argument (an axis, a Python number): not an edge
            graph.edges.append(Edge(arg, node, position))
            if arg.grad_fn is None and id(arg) not in seen_leaves:
                seen_leaves.add(id(arg))
                graph.leaves.append(arg)
    return graph


def cross_attention_edges(graph: Graph) -> list:
    """The edges where a decoder reads an encoder: the tensor that enters the key and value
    projections of an attention call whose queries come from another tensor (the ``memory``
    of ``MultiHeadAttention(x, memory=memory)``). Found from the module calls that
    ``nn.Module`` records on the nodes; attention without ``q_proj``/``k_proj``/``v_proj``
    submodules has none."""
    ranges: dict = {}  # id(module) -> (module, [(start, end), ...]) of its calls
    for node in graph.nodes:
        for record in node.__dict__.get("module_calls", ()):
            module = record.module()
            if module is not None:
                ranges.setdefault(id(module), (module, []))[1].append((record.start, record.end))
    found = []
    for module, calls in ranges.values():
        projections = [getattr(module, name, None) for name in ("q_proj", "k_proj", "v_proj")]
        if any(id(p) not in ranges for p in projections):
            continue
        for start, end in calls:
            q, k, v = (_inputs_of(graph, _call_within(ranges[id(p)][1], start, end))
                       for p in projections)  # fmt: skip
            found += [edge for edge in k + v if all(edge.tensor is not e.tensor for e in q)]
    return found


def _call_within(calls: list, start: int, end: int) -> tuple:
    return next(((s, e) for s, e in calls if start <= s and e <= end), (start, start))


def _inputs_of(graph: Graph, span: tuple) -> list:
    """The edges that bring a tensor made before the call ``span`` (not a parameter) in."""
    start, end = span
    return [
        edge
        for edge in graph.edges
        if start <= edge.head.seq < end
        and edge.tensor.grad_fn is not None
        and edge.tensor.grad_fn.seq < start
    ]
