"""``explore``: the computation graph as one self-contained HTML page, to watch backprop happen.

    with mg.viz.record_grads():
        loss.backward()
    page = mg.viz.explore(loss, params=model, tokens=list("사과는 맛있다"))
    page                       # in Jupyter: shown inline
    page.save("gpt.html")      # one file, opens offline in any browser

The page draws the graph as ``draw_graph`` lays it out (module boxes, shortcuts in their own
style, repeated blocks folded; drag to pan, wheel to zoom) and adds:

- a backward stepper: moment 0 is the seed dL/dL = 1 at the output; moment k is after the
  k-th node the engine ran backward for (the order ``record_grads`` noted). A node lights up
  when its gradient has arrived; each arrow shows the norm of the gradient that flowed along
  it, from the moment it flowed;
- the shortcuts, each beside its branch: the skip edge hands dL/dy to x unchanged, while the
  branch hands back to x what passed through F;
- a click on a node: its op, the equation it computes, its module, shapes and dtype, the
  bytes it saved for backward, a heatmap and histogram of its value and a heatmap of its
  gradient; for parameters their path in the model (``blocks.0.attn.q_proj.weight``); for
  the attention weights A, one map per head, labelled with ``tokens``.

The page's script and style are inlined (``explore_page/``) and it fetches nothing, so it
works offline and inside a notebook's output cell.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import graphviz
import numpy as np

from minigrad.backend import to_numpy
from minigrad.tensor import Tensor
from minigrad.viz.draw import (
    NO_GRADIENT_YET,
    _bytes,
    _Drawing,
    _GradScale,
    _parameter_names,
    _title,
    format_norm,
)
from minigrad.viz.equations import equation_labels
from minigrad.viz.graph import collect_graph
from minigrad.viz.layout import _collapsed_call, lay_out
from minigrad.viz.modules import Folding, build_call_tree, fold_repeats, module_names
from minigrad.viz.record import thumbnail
from minigrad.viz.render import INSTALL_HINT
from minigrad.viz.shortcuts import shortcuts_in

MAX_ATTENTION = 64  # query and key positions drawn per attention map
HISTOGRAM_BINS = 24


@dataclass(eq=False)
class ExplorerPage:
    """One explorer page: ``html`` is the whole document; ``save(path)`` writes it."""

    html: str
    title: str
    has_grads: bool
    height: int = 760

    def save(self, path) -> Path:
        """Write the page to ``path`` (folders made as needed); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.html, encoding="utf-8")
        return path

    def _repr_html_(self) -> str:
        """In Jupyter: the page in an iframe, so its script runs apart from the notebook's."""
        return (
            f'<iframe srcdoc="{html.escape(self.html, quote=True)}" '
            f'style="width: 100%; height: {self.height}px; border: 1px solid #ddd" '
            f'title="{html.escape(self.title, quote=True)}"></iframe>'
        )

    def __repr__(self) -> str:
        state = "gradients recorded" if self.has_grads else NO_GRADIENT_YET
        return f"ExplorerPage({self.title!r}, {len(self.html) / 1024:.0f} KiB, {state})"


def explore(
    output: Tensor,
    params=None,
    tokens=None,
    depth: int | None = None,
    fold_repeated: bool = True,
    max_nodes: int | None = None,
) -> ExplorerPage:
    """The explorer page of the graph that made ``output`` (see the module docstring).

    ``params``, ``depth``, ``fold_repeated`` and ``max_nodes`` are those of ``draw_graph``.
    ``tokens``: one label per sequence position (``["사과", "는", "맛있다"]``), for the rows
    and columns of the attention maps. Before a backward inside ``record_grads()`` the page
    draws the graph and says "no gradient yet".
    """
    if not isinstance(output, Tensor):
        raise TypeError(f"explore: output must be a Tensor, got {type(output).__name__}")
    tokens = _check_tokens(tokens)
    graph = collect_graph(output)
    model, param_names = _parameter_names(params, graph)
    tree = build_call_tree(graph.nodes, module_names(model))
    shortcuts = shortcuts_in(graph)
    folding = fold_repeats(tree) if fold_repeated else Folding()
    layout = lay_out(graph, tree, shortcuts, folding, depth, param_names, max_nodes)
    equations = equation_labels(tree, shortcuts)
    arrow_ids = {id(arrow): f"a{index}" for index, arrow in enumerate(layout.arrows)}
    drawing = _PageDrawing(
        arrow_ids,
        layout,
        param_names,
        equations,
        _GradScale(layout) if graph.has_grads else None,
        True,
        True,
        False,
        False,
    )
    title = _title(output, len(graph.nodes), len(shortcuts), not graph.has_grads)
    svg = _svg(drawing.digraph(title, True, max_nodes))

    facts = _Facts(graph, tree, folding, depth, param_names, equations)
    data = {
        "title": title.replace("\\n", " "),
        "hasGrads": graph.has_grads,
        "noGradient": "" if graph.has_grads else NO_GRADIENT_YET,
        "tokens": tokens,
        "steps": facts.steps(),
        "items": {key: facts.item(item, tokens) for key, item in layout.items.items()},
        "arrows": [facts.arrow(arrow, arrow_ids[id(arrow)]) for arrow in layout.arrows],
        "shortcuts": [facts.shortcut(shortcut) for shortcut in shortcuts],
    }
    page_title = f"minigrad explorer: {output.name or 'output'} {tuple(output.shape)}"
    return ExplorerPage(_page(page_title, svg, data), page_title, graph.has_grads)


class _PageDrawing(_Drawing):
    """draw_graph's drawing, each arrow with an ``id`` the page finds it by."""

    def __init__(self, arrow_ids: dict, *args):
        super().__init__(*args)
        self.arrow_ids = arrow_ids

    def _arrow_attrs(self, arrow) -> dict:
        return {**super()._arrow_attrs(arrow), "id": self.arrow_ids[id(arrow)]}


def _svg(dot: graphviz.Digraph) -> str:
    """The graph laid out by Graphviz's ``dot``, as an SVG element to inline."""
    try:
        svg = dot.pipe(format="svg").decode("utf-8")
    except graphviz.ExecutableNotFound:
        message = f"explore: laying out the graph needs Graphviz's dot; {INSTALL_HINT}"
        raise RuntimeError(message) from None
    return svg[svg.index("<svg") :]


def _check_tokens(tokens) -> list | None:
    if tokens is None:
        return None
    if isinstance(tokens, str):
        raise TypeError("explore: tokens must be a list of labels, one per position, not a str")
    return [str(token) for token in tokens]


class _Facts:
    """What the page shows about the graph, as plain data: the order of the backward pass,
    each item's details, each arrow's gradients, each shortcut beside its branch."""

    def __init__(self, graph, tree, folding, depth, param_names, equations):
        self.graph, self.tree, self.equations = graph, tree, equations
        self.param_names = param_names
        ran = [node for node in graph.nodes if getattr(node, "backward_step", None) is not None]
        ran.sort(key=lambda node: node.backward_step)
        self.ran = ran
        self.moment = {id(node): index + 1 for index, node in enumerate(ran)}
        self.readers = graph.consumers()
        self.key_of = {}  # id(node) -> the key of the item that stands for it
        for node in graph.nodes:
            shown = folding.shown(node)
            collapsed = _collapsed_call(tree.owner_of(shown), depth)
            self.key_of[id(node)] = f"m{collapsed.key}" if collapsed else f"n{shown.seq}"
        self.stands_for: dict = {}  # item key -> the nodes it stands for
        for node in graph.nodes:
            self.stands_for.setdefault(self.key_of[id(node)], []).append(node)

    # -- the backward pass, moment by moment -------------------------------------------------

    def steps(self) -> list:
        """For each moment 1..N: the item whose node ran its backward, and what it was."""
        return [{"item": self.key_of[id(node)], "text": self._describe(node)} for node in self.ran]

    def _describe(self, node) -> str:
        call = self.tree.owner_of(node)
        equation = self.equations.get(id(node))
        what = f"{equation} ({node.name})" if equation else node.name
        return f"{call.name or call.type_name}: {what}" if call is not None else what

    def _edge(self, edge) -> list:
        """[moment it flowed, its label text, its norm] (norm None: no gradient along it)."""
        norm = edge.grad_norm
        return [self.moment.get(id(edge.head)), None if norm is None else format_norm(norm), norm]

    def _received(self, tensors) -> list | None:
        """[first, last]: the moments at which gradients reached these tensors (None: never)."""
        moments = [
            self.moment[id(edge.head)]
            for tensor in tensors
            for edge in self.readers.get(id(tensor), ())
            if edge.grad_norm is not None and id(edge.head) in self.moment
        ]
        return [min(moments), max(moments)] if moments else None

    # -- the items (nodes of the picture) ----------------------------------------------------

    def item(self, item, tokens) -> dict:
        if item.kind == "op":
            return self._op(item, tokens)
        if item.kind == "module":
            return self._module(item)
        tensor = item.tensor
        if item.kind == "output":
            info = {"kind": "output", "name": tensor.name or "output", "received": [0, 0]}
            info["gradNote"] = "the seed of backward: dL/dL = 1" if tensor.numel() == 1 else ""
        else:
            name = (
                self.param_names.get(id(tensor))
                or tensor.name
                or ("leaf (requires grad)" if item.kind == "leaf" else "constant")
            )
            info = {"kind": item.kind, "name": name, "received": self._received([tensor])}
        info.update(_tensor_facts(tensor))
        info["value"] = summary(tensor.array, histogram=True, tokens=self._rows_are(tensor, tokens))
        info["grad"], info["gradEdges"] = self._gradient(tensor)
        return info

    def _op(self, item, tokens) -> dict:
        node = item.node
        nodes = self.stands_for.get(item.key, [node])
        call = item.call
        output = node.outputs[0]() if node.outputs else None
        outputs = [out() for n in nodes for out in n.outputs]
        info = {
            "kind": "op",
            "op": node.name,
            "equation": self.equations.get(id(node)),
            "module": (call.name or call.type_name) if call is not None else "",
            "moduleType": call.type_name if call is not None else "",
            "copies": [_owner_name(self.tree, n) for n in nodes] if len(nodes) > 1 else [],
            "inputs": [self._input(arg) for arg in node.inputs],
            "saved": _bytes(node.count_saved_bytes()),
            "received": [0, 0] if output is self.graph.output else self._received(outputs),
            "ran": self.moment.get(id(node)),
        }
        if output is not None:
            info.update(_tensor_facts(output))
            info["value"] = summary(
                output.array, histogram=True, tokens=self._rows_are(output, tokens)
            )
            info["grad"], info["gradEdges"] = self._gradient(output)
            if (info["equation"] or "").startswith("A = softmax"):
                info["attention"] = _attention(output.array, tokens, info["module"])
        return info

    def _module(self, item) -> dict:
        call = item.call
        nodes = call.nodes()
        return {
            "kind": "module",
            "name": call.name or call.type_name,
            "moduleType": call.type_name,
            "copies": [copy.name for copy in call.copies] if len(call.copies) > 1 else [],
            "ops": len(nodes),
            "params": item.hidden_params,
            "shortcuts": item.hidden_shortcuts,
            "received": self._received([out() for n in nodes for out in n.outputs]),
        }

    def _input(self, arg) -> list:
        """[what it is, shape, dtype] of one argument of an op."""
        if not isinstance(arg, Tensor):
            text = repr(arg)
            return [text if len(text) <= 40 else text[:37] + "...", "", ""]
        if arg.grad_fn is not None:
            what = self.equations.get(id(arg.grad_fn)) or arg.grad_fn.name
        else:
            what = self.param_names.get(id(arg)) or arg.name or "leaf"
        return [what, str(tuple(arg.shape)), str(arg.dtype)]

    def _gradient(self, tensor) -> tuple:
        """(the thumbnail summary of dL/d tensor, the edges it arrived along) from what
        ``record_grads`` noted: the sum of the thumbnails of the gradients of its readers."""
        edges = [e for e in self.readers.get(id(tensor), ()) if e.grad_norm is not None]
        pictures = [_edge_thumbnail(e) for e in edges]
        arrived = [[self._edge(e)[1], self._reader(e)] for e in edges]
        if not pictures or any(p is None for p in pictures):
            return None, arrived
        return summary(sum(pictures), shape=tuple(tensor.shape)), arrived

    def _reader(self, edge) -> str:
        """What reads along an edge: the equation it computes, or its module and op."""
        if id(edge.head) in self.equations:
            return self.equations[id(edge.head)]
        owner = _owner_name(self.tree, edge.head)
        return f"{owner} ({edge.head.name})" if owner else edge.head.name

    def _rows_are(self, tensor, tokens) -> list | None:
        """The tokens, when the rows of tensor's thumbnail are its sequence positions."""
        if tokens is None or tensor.ndim < 3 or id(tensor) in self.param_names:
            return None
        return tokens if tensor.shape[-2] == len(tokens) else None

    # -- arrows and shortcuts ----------------------------------------------------------------

    def arrow(self, arrow, arrow_id: str) -> dict:
        moments = [self.moment.get(id(edge.head)) for edge in arrow.edges]
        if not arrow.edges:  # the output's own arrow: the seed is there from moment 0
            moments = [0]
        shortcut = arrow.shortcut is not None
        return {
            "id": arrow_id,
            "tail": arrow.tail,
            "head": arrow.head,
            "rows": 1 if shortcut else 0,  # label rows before the norms ("shortcut")
            "moments": [m for m in moments if m is not None],
            "norms": [self._edge(edge) for edge in arrow.edges if edge.grad_norm is not None],
            "edges": [[edge.head.seq, edge.position] for edge in arrow.edges],
            "kind": "shortcut" if shortcut else "branch" if arrow.branch is not None else "",
        }

    def shortcut(self, shortcut) -> dict:
        """The sum y = x + F(x): what reached y, what the skip edge handed to x (unchanged),
        and what the branch handed back to x along each edge where F reads x."""
        node = shortcut.node
        skip_edge = next(e for e in self.readers[id(shortcut.skip)] if e.head is node)
        inside = _nodes_between(shortcut.skip, shortcut.branch)
        branch_edges = [
            edge
            for edge in self.readers.get(id(shortcut.skip), ())
            if edge.head is not node and id(edge.head) in inside
        ]
        where = _owner_name(self.tree, node)
        equation = (self.equations.get(id(node)) or "x + F(x)").replace("  (shortcut)", "")
        return {
            "name": f"{where}: {equation}" if where else equation,
            "item": self.key_of[id(node)],
            "moment": self.moment.get(id(node)),
            "skip": self._edge(skip_edge),
            "branch": [[*self._edge(edge), self._reader(edge)] for edge in branch_edges],
        }


def _nodes_between(skip: Tensor, branch: Tensor) -> set:
    """ids of the nodes of F in branch = F(skip): those that branch depends on, made after
    skip (so that they may read it)."""
    if branch.grad_fn is None:
        return set()
    after = skip.grad_fn.seq if skip.grad_fn is not None else -1
    found, stack = set(), [branch.grad_fn]
    while stack:
        node = stack.pop()
        if id(node) in found or node.seq <= after:
            continue
        found.add(id(node))
        stack.extend(a.grad_fn for a in node.inputs if getattr(a, "grad_fn", None) is not None)
    return found


def _owner_name(tree, node) -> str:
    call = tree.owner_of(node)
    while call is not None and not call.name:
        call = call.parent
    return call.name if call is not None else ""


def _edge_thumbnail(edge):
    pictures = getattr(edge.head, "edge_grad_thumbnails", None)
    return None if pictures is None else pictures[edge.position]


def _tensor_facts(tensor: Tensor) -> dict:
    return {
        "shape": str(tuple(tensor.shape)),
        "dtype": str(tensor.dtype),
        "bytes": _bytes(tensor.array.nbytes),
    }


def summary(array, shape=None, histogram: bool = False, tokens=None) -> dict:
    """A heatmap of ``array``'s thumbnail (``record.thumbnail``; ``array`` may already be
    one) in 8 bits, and with ``histogram`` the value's statistics and histogram."""
    picture = thumbnail(array) if shape is None else array
    shape = tuple(array.shape) if shape is None else shape
    info = {"shape": list(shape), **_quantized(picture)}
    info["pooled"] = list(picture.shape) != _first_matrix_shape(shape)
    if tokens is not None and not info["pooled"]:
        info["rowLabels"] = tokens
    if histogram:
        values = to_numpy(array).astype(np.float64).reshape(-1)
        values = values[np.isfinite(values)]
        if values.size:
            counts, edges = np.histogram(values, bins=HISTOGRAM_BINS)
            info["stats"] = {
                name: float(f(values)) for name, f in
                (("min", np.min), ("max", np.max), ("mean", np.mean), ("std", np.std))
            }  # fmt: skip
            info["histogram"] = {"counts": counts.tolist(), "low": edges[0], "high": edges[-1]}
    return info


def _first_matrix_shape(shape: tuple) -> list:
    return [1, 1] if not shape else [1, shape[0]] if len(shape) == 1 else list(shape[-2:])


def _quantized(matrix: np.ndarray) -> dict:
    """A matrix as signed 8 bits around its largest magnitude ``scale``: -127..127 -> bytes."""
    finite = np.where(np.isfinite(matrix), matrix, 0.0)
    scale = float(np.abs(finite).max()) if finite.size else 0.0
    levels = np.zeros(matrix.shape) if scale == 0 else np.round(finite / scale * 127)
    data = (levels.astype(np.int16) + 128).astype(np.uint8)
    return {
        "rows": int(matrix.shape[0]),
        "cols": int(matrix.shape[1]),
        "scale": scale,
        "data": base64.b64encode(data.tobytes()).decode("ascii"),
    }


def _attention(weights, tokens, module: str) -> dict:
    """The attention weights A (B, heads, T, S) of the first sequence, one map per head, each
    weight in [0, 1] as a byte."""
    maps = to_numpy(weights).astype(np.float64)
    while maps.ndim > 3:
        maps = maps[0]
    maps = maps.reshape((1,) * (3 - maps.ndim) + maps.shape)[:, :MAX_ATTENTION, :MAX_ATTENTION]
    heads, queries, keys = maps.shape
    if tokens is not None and len(tokens) not in (queries, keys):
        raise ValueError(
            f"explore: tokens has {len(tokens)} labels, but the attention maps of {module} "
            f"are over {queries} query and {keys} key positions"
        )
    data = np.round(np.clip(maps, 0.0, 1.0) * 255).astype(np.uint8)
    return {
        "heads": heads,
        "rows": queries,
        "cols": keys,
        "data": base64.b64encode(data.tobytes()).decode("ascii"),
        "rowLabels": tokens[:queries] if tokens is not None and len(tokens) == queries else None,
        "colLabels": tokens[:keys] if tokens is not None and len(tokens) == keys else None,
    }


def _page(title: str, svg: str, data: dict) -> str:
    """The template of explore_page/ with its style, script, the SVG and the data inlined."""
    folder = resources.files("minigrad.viz").joinpath("explore_page")
    # "<" only occurs inside JSON strings, where "\u003c" says the same and can never end
    # the script element ("</script>") that holds the data
    payload = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"))
    parts = {
        "TITLE": html.escape(title),
        "STYLE": folder.joinpath("page.css").read_text(encoding="utf-8"),
        "SCRIPT": folder.joinpath("page.js").read_text(encoding="utf-8"),
        "SVG": svg,
        "DATA": payload.replace("<", "\\u003c"),
    }
    template = folder.joinpath("page.html").read_text(encoding="utf-8")
    return re.sub(r"\{\{([A-Z]+)\}\}", lambda match: parts[match.group(1)], template)


def _finite(value):
    """``value`` with every nan or infinite float made None (JSON has no nan)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value
