"""What to draw: which graph nodes become which boxes and arrows of the picture.

Three things make the picture smaller than the graph:

- folding (``modules.fold_repeats``): the copies 1..N-1 of a run of identical blocks are not
  drawn; copy 0 stands for all of them. Arrows between copies disappear, arrows that enter
  or leave the run attach to copy 0;
- depth: a module call nested deeper than ``depth`` is drawn as one node; the arrows inside
  it disappear and its parameters are only counted;
- ``max_nodes``: past it, only the nodes nearest the output stay.

Every remaining arrow keeps the graph ``Edge``s it stands for, so that the drawing can label
it with the gradient that flowed along them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from minigrad.viz.graph import Graph
from minigrad.viz.modules import Call, CallTree, Folding


@dataclass(eq=False)
class Item:
    """One node of the picture."""

    key: str
    kind: str  # "op", "module", "param", "leaf", "constant", "output"
    box: Call | None  # the module box it sits in (None: outside every box)
    node: object = None  # the graph node (kind "op")
    call: Call | None = None  # the collapsed call (kind "module"), or the op's own module
    tensor: object = None  # the tensor (leaves and the output)
    hidden_params: int = 0  # parameters inside a collapsed module
    hidden_shortcuts: int = 0  # shortcuts inside a collapsed module


@dataclass(eq=False)
class Arrow:
    """One arrow of the picture, standing for one or more graph edges."""

    tail: str
    head: str
    edges: list = field(default_factory=list)
    shortcut: object = None  # the Shortcut whose skip edge this is
    branch: object = None  # the Shortcut whose branch edge this is


@dataclass(eq=False)
class Layout:
    items: dict  # key -> Item, in drawing order
    arrows: list
    dropped: int = 0  # nodes left out because of max_nodes


def lay_out(
    graph: Graph,
    tree: CallTree,
    shortcuts: list,
    fold: Folding,
    depth: int | None,
    param_names: dict,
    max_nodes: int | None,
) -> Layout:
    """Map the graph to picture items and arrows (see the module docstring).

    ``fold`` is what ``modules.fold_repeats`` found; ``param_names`` maps id(parameter) to
    its dotted name.
    """
    items: dict = {}
    keys = _node_keys(graph, tree, fold, depth, items)
    skip_edges = {(id(s.node), s.skip_position): s for s in shortcuts}
    branch_edges = {(id(s.node), s.branch_position): s for s in shortcuts}
    _count_hidden(items, shortcuts, keys, param_names, fold)

    arrows: dict = {}
    leaf_index = {id(leaf): index for index, leaf in enumerate(graph.leaves)}
    for edge in graph.edges:
        if _dropped_by_fold(edge, fold):
            continue
        head_key = keys[id(edge.head)]
        tail = edge.tensor.grad_fn
        if tail is None:
            if items[head_key].kind == "module" and id(edge.tensor) in param_names:
                continue  # a parameter inside a collapsed module: counted in its label
            tail_key = f"t{leaf_index[id(edge.tensor)]}"
            if tail_key not in items:
                items[tail_key] = _leaf_item(tail_key, edge.tensor, items[head_key], param_names)
        else:
            tail_key = keys[id(tail)]
        if tail_key == head_key:
            continue  # inside one collapsed module
        merge = "module" in (items[tail_key].kind, items[head_key].kind) or _is_mapped(edge, fold)
        arrow_key = (tail_key, head_key) if merge else (tail_key, head_key, edge.position)
        arrow = arrows.setdefault(arrow_key, Arrow(tail_key, head_key))
        arrow.edges.append(edge)
        if items[head_key].kind == "op":  # the Add itself is drawn (not inside a module)
            slot = (id(edge.head), edge.position)
            arrow.shortcut = arrow.shortcut or skip_edges.get(slot)
            arrow.branch = arrow.branch or branch_edges.get(slot)

    output = graph.output
    items["output"] = Item("output", "output", None, tensor=output)
    if output.grad_fn is not None:
        arrows[("output",)] = Arrow(keys[id(output.grad_fn)], "output")

    used = {arrow.tail for arrow in arrows.values()} | {a.head for a in arrows.values()}
    items = {key: item for key, item in items.items() if key in used or key == "output"}
    layout = Layout(items, list(arrows.values()))
    if max_nodes is not None and len(items) > max_nodes:
        _truncate(layout, max_nodes)
    return layout


def _node_keys(graph, tree, fold, depth, items) -> dict:
    """id(node) -> the key of the item that stands for it; creates op and module items."""
    keys = {}
    for node in graph.nodes:
        shown = fold.shown(node)
        collapsed = _collapsed_call(tree.owner_of(shown), depth)
        if collapsed is not None:
            key = f"m{collapsed.key}"
            if key not in items:
                items[key] = Item(key, "module", _box_of(collapsed.parent), call=collapsed)
        else:
            key = f"n{shown.seq}"
            if key not in items:
                owner = tree.owner_of(shown)
                items[key] = Item(key, "op", _box_of(owner), node=shown, call=owner)
        keys[id(node)] = key
    return keys


def _collapsed_call(call: Call | None, depth: int | None) -> Call | None:
    """The call at level depth + 1 that holds ``call`` (None when none is that deep)."""
    if depth is None or call is None or call.level <= depth:
        return None
    while call.level > depth + 1:
        call = call.parent
    return call


def _box_of(call: Call | None) -> Call | None:
    """The module box an item sits in: its call, unless that call ran a single op (then the
    op node itself says which module it is, and needs no box of its own)."""
    if call is not None and not call.children and len(call.own_nodes) == 1:
        return call.parent
    return call


def _count_hidden(items, shortcuts, keys, param_names, fold: Folding) -> None:
    """Count the parameters and shortcuts inside each collapsed module (in one copy)."""
    for item in items.values():
        if item.kind == "module":
            item.hidden_params = sum(
                1
                for node in item.call.nodes()
                for arg in node.inputs
                if id(arg) in param_names and getattr(arg, "grad_fn", 1) is None
            )
    for shortcut in shortcuts:
        item = items[keys[id(shortcut.node)]]
        if item.kind == "module" and id(shortcut.node) not in fold.twin:
            item.hidden_shortcuts += 1


def _leaf_item(key, tensor, first_reader: Item, param_names: dict) -> Item:
    if id(tensor) in param_names:
        kind = "param"
    else:
        kind = "leaf" if tensor.requires_grad else "constant"
    return Item(key, kind, first_reader.box, tensor=tensor)


def _dropped_by_fold(edge, fold: Folding) -> bool:
    """Edges inside copies 1..N-1 of a run, between copies, and their parameters' edges."""
    head_runs = fold.runs.get(id(edge.head), ())
    tail = edge.tensor.grad_fn
    tail_runs = fold.runs.get(id(tail), ()) if tail is not None else ()
    tail_run_ids = {run for run, _ in tail_runs}
    head_run_ids = {run for run, _ in head_runs}
    for run, copy_index in head_runs:
        if copy_index and (tail is None or run in tail_run_ids):
            return True
    return any(copy_index and run in head_run_ids for run, copy_index in tail_runs)


def _is_mapped(edge, fold: Folding) -> bool:
    tail = edge.tensor.grad_fn
    ends = (edge.head, tail) if tail is not None else (edge.head,)
    return any(id(end) in fold.twin for end in ends)


def _truncate(layout: Layout, max_nodes: int) -> None:
    """Keep the ``max_nodes`` items nearest the output (breadth-first, against the arrows)."""
    feeding: dict = {}
    for arrow in layout.arrows:
        feeding.setdefault(arrow.head, []).append(arrow.tail)
    kept, queue = {"output"}, deque(["output"])
    while queue and len(kept) < max_nodes:
        for tail in feeding.get(queue.popleft(), ()):
            if tail not in kept and len(kept) < max_nodes:
                kept.add(tail)
                queue.append(tail)
    layout.dropped = len(layout.items) - len(kept)
    layout.items = {key: item for key, item in layout.items.items() if key in kept}
    layout.arrows = [a for a in layout.arrows if a.tail in kept and a.head in kept]
