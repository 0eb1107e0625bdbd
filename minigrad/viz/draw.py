"""``draw_graph``: the computation graph as a ``graphviz.Digraph``, with its gradient shortcuts
standing out and, after a backward pass, the gradient that flowed along every edge.

    with mg.viz.record_grads():
        loss.backward()
    dot = mg.viz.draw_graph(loss, params=model)
    mg.viz.render(dot, "gpt.svg")

What the picture shows:

- op nodes (rounded boxes) with the shape and dtype of what they made, named after the
  Transformer equation they compute where that is recognisable (``S = QK^T/sqrt(d_k)``);
  parameters (blue) by their path in the model (``blocks.0.attn.q_proj.weight``); other
  leaves and constants (grey); the output (green);
- arrows in the direction data flows; gradients flow back along the same arrows. After a
  backward inside ``record_grads()`` each arrow is labelled with the norm of the gradient
  that went along *that* arrow, and coloured on a log scale (legend). A tensor read twice,
  like the ``x`` of ``x + F(x)``, gets two different gradients: both are shown;
- in an encoder-decoder, the edges that carry the encoder's output into each
  cross-attention's K and V projections dashed and teal, labelled "encoder → K, V": where the
  decoder reads the encoder;
- shortcut edges (``viz.find_shortcuts``) thick, doubled and labelled "shortcut"; the nodes
  on the residual stream share a graphviz ``group``, so the stream runs straight down and
  the branches it skips sit beside it, in their own boxes;
- each module call as a box (``cluster_modules``), deeper calls folded into one node
  (``depth``), identical repeated blocks drawn once and marked "xN".
"""

from __future__ import annotations

import html
import math

import graphviz

from minigrad.tensor import Tensor
from minigrad.viz.equations import equation_labels
from minigrad.viz.expand import input_names, recipe_for
from minigrad.viz.graph import collect_graph, cross_attention_edges
from minigrad.viz.layout import Arrow, Item, Layout, lay_out
from minigrad.viz.modules import Folding, build_call_tree, fold_repeats, module_names
from minigrad.viz.shortcuts import shortcuts_in

# plasma, without its palest end (it must show on white): small gradients dark, large bright
PALETTE = ("#0d0887", "#6a00a8", "#b12a90", "#e16462", "#f89540")
SHORTCUT_COLOUR = "#e6550d"
CROSS_COLOUR = "#0f8b8d"  # the decoder reading the encoder
NO_GRAD_COLOUR = "#b0b0b0"
DECADES = 4  # the colour scale spans at most 10^4
FILL = {
    "op": "#f4f4f4",
    "fused": "#fff3c4",
    "shortcut": "#ffd8bf",
    "module": "#e9e2f7",
    "param": "#dbeafe",
    "leaf": "#dbeafe",
    "constant": "#eeeeee",
    "output": "#d1fae5",
}
BOX_FILLS = ("#fbfbfb", "#f3f6fb", "#fbf7f0", "#f4fbf4")
NO_GRADIENT_YET = "no gradient yet: run loss.backward() inside mg.viz.record_grads()"


def draw_graph(
    output: Tensor,
    params=None,
    show_grads: bool = True,
    highlight_shortcuts: bool = True,
    cluster_modules: bool = True,
    max_nodes: int | None = None,
    depth: int | None = None,
    show_saved_bytes: bool = False,
    expand_fused: bool = False,
    fold_repeated: bool = True,
) -> graphviz.Digraph:
    """Draw the graph that made ``output`` (see the module docstring for what it shows).

    ``params``: a dict name -> tensor, or a Module (its ``named_parameters()``), to name the
    parameters; by default the model whose call made ``output``. ``depth=k`` draws modules
    nested deeper than k as one node each (the model itself is level 0, its children 1);
    ``fold_repeated`` draws identical consecutive blocks once, marked "xN"; ``max_nodes``
    keeps only the nodes nearest the output; ``show_saved_bytes`` shows what each op saved
    for backward; ``expand_fused`` draws beside each fused op (softmax, LayerNorm, ...) the
    primitive steps it stands for.
    """
    graph = collect_graph(output)
    model, param_names = _parameter_names(params, graph)
    tree = build_call_tree(graph.nodes, module_names(model))
    shortcuts = shortcuts_in(graph)
    folding = fold_repeats(tree) if fold_repeated and cluster_modules else Folding()
    layout = lay_out(graph, tree, shortcuts, folding, depth, param_names, max_nodes)
    drawing = _Drawing(
        layout,
        param_names,
        equation_labels(tree, shortcuts),
        _GradScale(layout) if show_grads and graph.has_grads else None,
        highlight_shortcuts,
        cluster_modules,
        show_saved_bytes,
        expand_fused,
    )
    drawing.cross = {(id(edge.head), edge.position) for edge in cross_attention_edges(graph)}
    no_grads = show_grads and not graph.has_grads
    title = _title(output, len(graph.nodes), len(shortcuts), no_grads)
    return drawing.digraph(title, show_grads, max_nodes)


def format_norm(value: float) -> str:
    """How an edge label writes a gradient norm (3 significant digits)."""
    return f"{value:.3g}"


def _parameter_names(params, graph):
    """(the model, id(parameter) -> name): the model is ``params`` if it is a Module, else
    the one whose call made the graph (None if no module did); the names come from a
    ``params`` dict if one is given, else from the model."""
    is_module = hasattr(params, "named_parameters")
    model = params if is_module else _outermost_module(graph)
    if params is not None and not is_module:
        named = dict(params)
    elif model is not None:
        named = dict(model.named_parameters())
        if hasattr(model, "named_buffers"):
            named.update(dict(model.named_buffers()))
    else:
        named = {}
    return model, {id(tensor): name for name, tensor in named.items()}


def _outermost_module(graph):
    """The module whose call holds the most nodes: the model, when a model made ``output``."""
    best, best_span = None, -1
    for node in graph.nodes:
        for record in node.__dict__.get("module_calls", ()):
            module = record.module()
            if module is not None and record.end - record.start > best_span:
                best, best_span = module, record.end - record.start
    return best


def _title(output: Tensor, node_count: int, shortcut_count: int, no_grads: bool) -> str:
    what = output.name or "the output"
    title = (
        f"computation graph of {what} {_shape(output)}: {_count(node_count, 'op')}, "
        f"{_count(shortcut_count, 'gradient shortcut')}"
    )
    return title + (f"\\n({NO_GRADIENT_YET})" if no_grads else "")


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def _shape(tensor: Tensor) -> str:
    return f"{tuple(tensor.shape)} {tensor.dtype}"


def _bytes(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    if count < 1024**2:
        return f"{count / 1024:.1f} KiB"
    return f"{count / 1024**2:.1f} MiB"


class _GradScale:
    """Gradient norm -> colour, on a log scale between the smallest and largest drawn."""

    def __init__(self, layout: Layout):
        norms = [
            edge.grad_norm
            for arrow in layout.arrows
            for edge in arrow.edges
            if edge.grad_norm is not None and edge.grad_norm > 0
        ]
        self.high = max(norms) if norms else 1.0
        # at most DECADES below the largest: a few near-zero norms (the key bias, whose
        # gradient softmax cancels) must not squeeze every other colour into one
        self.low = max(min(norms), self.high / 10**DECADES) if norms else 1.0
        self.clipped = bool(norms) and min(norms) < self.low

    def position(self, value: float) -> float:
        """0 at the smallest norm drawn, 1 at the largest (log scale)."""
        if self.high <= self.low:
            return 0.5
        span = math.log10(self.high) - math.log10(self.low)
        return min(max((math.log10(value) - math.log10(self.low)) / span, 0.0), 1.0)

    def colour(self, value: float | None) -> str:
        if value is None or value <= 0:
            return NO_GRAD_COLOUR
        where = self.position(value) * (len(PALETTE) - 1)
        index = min(int(where), len(PALETTE) - 2)
        return _mix(PALETTE[index], PALETTE[index + 1], where - index)

    def ticks(self, count: int = 5) -> list:
        """(colour, value) pairs from the smallest norm to the largest."""
        if self.high <= self.low:
            return [(self.colour(self.low), self.low)]
        ratio = (self.high / self.low) ** (1 / (count - 1))
        return [(self.colour(self.low * ratio**k), self.low * ratio**k) for k in range(count)]


def _mix(start: str, end: str, fraction: float) -> str:
    a = [int(start[i : i + 2], 16) for i in (1, 3, 5)]
    b = [int(end[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * fraction):02x}" for x, y in zip(a, b))


class _Drawing:
    """Turns a Layout into graphviz statements: node labels, boxes, arrow styles, legend."""

    def __init__(
        self,
        layout,
        param_names,
        equations,
        scale,
        highlight,
        clusters,
        saved_bytes,
        expand,
    ):
        self.layout, self.param_names, self.equations = layout, param_names, equations
        self.scale, self.highlight, self.clusters = scale, highlight, clusters
        self.saved_bytes, self.expand = saved_bytes, expand
        self.cross = set()  # (id(head), position) of the edges from an encoder into K and V
        self.stream = set()  # keys of the items on the residual stream
        self.sums = set()  # keys of the Add nodes that shortcuts enter
        for arrow in layout.arrows:
            if arrow.shortcut is not None and highlight:
                self.stream.update((arrow.tail, arrow.head))
                self.sums.add(arrow.head)

    def digraph(self, title: str, show_grads: bool, max_nodes: int | None) -> graphviz.Digraph:
        dot = graphviz.Digraph(
            "minigrad",
            graph_attr={
                "rankdir": "TB",
                "label": title,
                "labelloc": "t",
                "fontname": "Helvetica",
                "fontsize": "13",
                "nodesep": "0.3",
                "ranksep": "0.35",
                "newrank": "true",
            },
            node_attr={"fontname": "Helvetica", "fontsize": "10", "margin": "0.08,0.03"},
            edge_attr={"fontname": "Helvetica", "fontsize": "9", "arrowsize": "0.7"},
        )
        boxes = self._boxes()
        self._emit_box(dot, None, boxes)
        for arrow in self.layout.arrows:
            dot.edge(arrow.tail, arrow.head, **self._arrow_attrs(arrow))
        folded = any(box is not None and len(box.copies) > 1 for box, _, _ in boxes.values())
        dot.node("legend", self._legend(show_grads, max_nodes, folded), shape="plaintext")
        return dot

    # -- boxes ---------------------------------------------------------------------------

    def _boxes(self) -> dict:
        """id(box) -> (the box, its items, its child boxes); id(None) for the top level."""
        boxes = {id(None): (None, [], [])}
        for item in self.layout.items.values():
            box = item.box if self.clusters else None
            self._ensure_box(boxes, box)
            boxes[id(box)][1].append(item)
        return boxes

    def _ensure_box(self, boxes: dict, box) -> None:
        """Add ``box`` and the boxes around it, each listed as a child of its parent."""
        missing = []
        while box is not None and id(box) not in boxes:
            missing.append(box)
            box = box.parent
        for call in reversed(missing):
            boxes[id(call)] = (call, [], [])
            boxes[id(call.parent)][2].append(call)

    def _emit_box(self, graph, box, boxes) -> None:
        _, items, children = boxes[id(box)]
        for item in items:
            self._emit_item(graph, item)
        for child in children:
            with graph.subgraph(name=f"cluster_m{child.key}") as sub:
                sub.attr(
                    label=self._box_label(child),
                    labeljust="l",
                    style="rounded,filled",
                    fillcolor=BOX_FILLS[child.level % len(BOX_FILLS)],
                    color="#9a9a9a",
                    fontsize="11",
                    **{"class": "module"},
                )
                self._emit_box(sub, child, boxes)

    def _box_label(self, call) -> str:
        if len(call.copies) > 1:
            last = call.copies[-1]
            return (
                f"{call.name} … {last.name}: {call.type_name} ×{len(call.copies)}\\n"
                f"(drawn once; the arrows show {call.name})"
            )
        return call.title

    # -- nodes ---------------------------------------------------------------------------

    def _emit_item(self, graph, item: Item) -> None:
        attrs = {"shape": "box", "style": "rounded,filled", "fillcolor": FILL[item.kind]}
        if item.key in self.stream:
            attrs["group"] = "residual"
        if item.kind == "op":
            label, attrs = self._op_label(item), self._op_attrs(item, attrs)
        elif item.kind == "module":
            label = self._module_label(item)
            attrs.update(style="filled,bold", **{"class": "module-node"})
        else:
            label = self._tensor_label(item)
            if item.kind == "output":
                attrs.update(shape="box", style="filled,bold")
            elif item.kind == "constant":
                attrs.update(shape="box", style="filled,dashed", fontsize="9")
            else:
                attrs.update(shape="box", style="filled", fontsize="9")
        recipe = recipe_for(item.node) if self.expand and item.kind == "op" else ()
        if recipe:
            self._emit_expanded(graph, item, label, attrs, recipe)
        else:
            graph.node(item.key, label, **attrs)

    def _op_attrs(self, item: Item, attrs: dict) -> dict:
        node = item.node
        if item.key in self.sums:
            attrs["fillcolor"] = FILL["shortcut"]
        elif recipe_for(node):
            attrs["fillcolor"] = FILL["fused"]
        attrs["class"] = "op"
        return attrs

    def _op_label(self, item: Item) -> str:
        node = item.node
        equation = self.equations.get(id(node))
        module = ""
        if item.call is not None and item.box is not item.call:  # a one-op module
            module = item.call.name or item.call.type_name
        if equation:
            title, detail = equation, f"{module}: {node.name}" if module else node.name
        else:
            title, detail = (module, node.name) if module else (node.name, "")
        rows = [f"<b>{html.escape(title)}</b>"]
        if detail:
            rows.append(html.escape(detail))
        output = node.outputs[0]() if node.outputs else None
        if output is not None:
            rows.append(f'<font color="#666666" point-size="8">{_shape(output)}</font>')
        if self.saved_bytes:
            saved = _bytes(node.count_saved_bytes())
            rows.append(f'<font color="#8a4b00" point-size="8">saved {saved}</font>')
        return "<" + "<br/>".join(rows) + ">"

    def _module_label(self, item: Item) -> str:
        call = item.call
        nodes = call.nodes()
        name, kind = call.name or call.type_name, call.type_name
        if len(call.copies) > 1:  # a folded run, collapsed
            name, kind = f"{name} … {call.copies[-1].name}", f"{kind} ×{len(call.copies)}"
        rows = [f"<b>{html.escape(name)}</b>", kind]
        output = nodes[-1].outputs[0]() if nodes and nodes[-1].outputs else None
        if output is not None:
            rows.append(f'<font color="#666666" point-size="8">→ {_shape(output)}</font>')
        counts = f"{_count(len(nodes), 'op')}, {_count(item.hidden_params, 'parameter')}"
        rows.append(f'<font point-size="8">{counts}</font>')
        if item.hidden_shortcuts:
            rows.append(
                f'<font color="{SHORTCUT_COLOUR}" point-size="8">'
                f"{_count(item.hidden_shortcuts, 'shortcut')} inside"
                f"{' each' if len(call.copies) > 1 else ''}</font>"
            )
        return "<" + "<br/>".join(rows) + ">"

    def _tensor_label(self, item: Item) -> str:
        tensor = item.tensor
        if item.kind == "param":
            name = self.param_names[id(tensor)]
        elif item.kind == "output":
            name = tensor.name or "output"
        else:
            fallback = "leaf (requires grad)" if item.kind == "leaf" else "constant"
            name = tensor.name or fallback
        shape = f'<font color="#666666" point-size="8">{_shape(tensor)}</font>'
        return f"<<b>{html.escape(name)}</b><br/>{shape}>"

    def _emit_expanded(self, graph, item: Item, label: str, attrs: dict, recipe) -> None:
        """The fused node and, in the same dashed box, the primitive steps it stands for."""
        node = item.node
        with graph.subgraph(name=f"cluster_fused_{item.key}") as box:
            box.attr(
                label=f"{node.name}: one fused node = these primitive steps",
                style="dashed,rounded",
                color="#c9a400",
                fontsize="9",
                **{"class": "fused"},
            )
            for name in input_names(node):
                box.node(f"{item.key}_{name}", name, shape="plaintext", fontsize="8")
            for name, text, _ in recipe:
                box.node(
                    f"{item.key}_{name}",
                    text,
                    shape="box",
                    style="dashed,rounded",
                    fontsize="8",
                    height="0.2",
                    **{"class": "primitive"},
                )
            for name, _, reads in recipe:
                for read in reads:
                    box.edge(f"{item.key}_{read}", f"{item.key}_{name}", color="#b8a040")
            box.node(item.key, label, **attrs)
            box.edge(f"{item.key}_y", item.key, style="dotted", arrowhead="none", label="=")

    # -- arrows --------------------------------------------------------------------------

    def _arrow_attrs(self, arrow: Arrow) -> dict:
        norms = [edge.grad_norm for edge in arrow.edges]
        known = [value for value in norms if value is not None]
        shortcut = arrow.shortcut is not None and self.highlight
        rows = ["shortcut"] if shortcut else []
        if self.scale is not None and known:
            if len(known) <= 3:  # one number per edge
                rows += [format_norm(value) for value in known]
            else:
                low, high = format_norm(min(known)), format_norm(max(known))
                rows.append(f"{len(known)} edges: {low} … {high}")
            colour = self.scale.colour(max(known))
        elif self.scale is not None and arrow.edges:
            colour = NO_GRAD_COLOUR  # no gradient flows here (a constant, an index)
        else:
            colour = "#555555"
        attrs = {"color": colour, "class": "edge-data"}
        if rows:
            attrs["label"] = "\\n".join(rows)
            attrs["fontcolor"] = colour if colour != NO_GRAD_COLOUR else "#555555"
        if shortcut:
            stroke = colour if self.scale is not None else SHORTCUT_COLOUR
            attrs.update(
                color=f"{stroke}:#ffffff:{stroke}",  # two parallel strokes: a highway
                penwidth="2.2",
                fontcolor=SHORTCUT_COLOUR if self.scale is None else stroke,
                weight="8",
                tooltip="shortcut: the identity path of x + F(x)",
                # left-justified lines (\l), indented: clear of the wide double stroke
                label="".join(f"   {row}\\l" for row in rows),
                **{"class": "shortcut"},
            )
        elif any((id(edge.head), edge.position) in self.cross for edge in arrow.edges):
            attrs.update(  # one colour whatever the gradient: the label holds its norm
                color=CROSS_COLOUR,
                style="dashed",
                penwidth="2.0",
                fontcolor=CROSS_COLOUR,
                label="\\n".join(["encoder → K, V", *rows]),
                tooltip="cross-attention: the decoder's keys and values from the encoder",
                **{"class": "cross-attention"},
            )
        elif arrow.branch is not None and self.highlight:
            attrs.update(penwidth="1.6", **{"class": "branch"})
        elif not arrow.edges:
            attrs.update(color="#555555")
        return attrs

    def _legend(self, show_grads: bool, max_nodes: int | None, folded: bool) -> str:
        rows = ['<tr><td align="left"><b>how to read</b></td></tr>']
        if self.highlight:
            rows.append(
                f'<tr><td align="left"><font color="{SHORTCUT_COLOUR}"><b>═══ shortcut</b>'
                "</font>: y = x + F(x); backward hands dL/dy to x unchanged (the I of "
                "I + dF/dx)</td></tr>"
            )
        if self.cross:
            rows.append(
                f'<tr><td align="left"><font color="{CROSS_COLOUR}"><b>- - encoder → K, V</b>'
                "</font>: cross-attention, the decoder reading the encoder's output</td></tr>"
            )
        if self.scale is not None:
            rows.append(
                '<tr><td align="left">edge label: norm of the gradient that flowed along that '
                "edge in the last backward (log colour scale)</td></tr>"
            )
            ticks = [(colour, format_norm(value)) for colour, value in self.scale.ticks()]
            if self.scale.clipped:
                ticks[0] = (ticks[0][0], "≤ " + ticks[0][1])
            cells = "".join(
                f'<td bgcolor="{colour}"><font color="white" point-size="8">{text}</font></td>'
                for colour, text in ticks
            )
            rows.append(
                f'<tr><td><table border="0" cellspacing="0"><tr>{cells}</tr></table></td></tr>'
            )
        elif show_grads:
            rows.append(f'<tr><td align="left">{html.escape(NO_GRADIENT_YET)}</td></tr>')
        if folded:
            rows.append(
                '<tr><td align="left">a box marked ×N stands for N identical blocks in a row'
                "</td></tr>"
            )
        if self.layout.dropped:
            rows.append(
                f'<tr><td align="left">… {self.layout.dropped} more nodes not drawn '
                f"(max_nodes={max_nodes})</td></tr>"
            )
        return f'<<table border="0" cellborder="0" cellpadding="2">{"".join(rows)}</table>>'
