"""Which module call made which graph node: the boxes of the drawing.

``nn.Module.__call__`` leaves, on the graph node of each output it made, a record
``ModuleCall(module, start, end)``: every node whose ``seq`` lies in ``[start, end)`` was
created during that call. Calls nest (a block calls its attention, which calls q_proj), so
their ranges nest, and each node belongs to the innermost call whose range holds it.

``build_call_tree`` turns the records into a tree of ``Call``s. Two more ideas live here
because they only concern that tree:

- *folding*: consecutive sibling calls of the same module type that ran the same ops, each
  fed by the one before (``blocks.0`` .. ``blocks.11``), are drawn once, as one box marked
  "x12"; every node of copy j maps to the node at the same place in copy 0;
- *depth*: calls nested deeper than ``depth`` are drawn as one node each.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minigrad.autograd.function import Context


@dataclass(eq=False)
class Call:
    """One call of one module, and what ran inside it."""

    module: object  # the Module (None if it was garbage collected since)
    start: int
    end: int
    name: str  # its path in the model, "blocks.0.attn" ("" for the model itself)
    parent: Call | None = None
    children: list = field(default_factory=list)
    own_nodes: list = field(default_factory=list)  # nodes of this call, not of a child
    level: int = 0  # 0 for an outermost call
    copies: list = field(default_factory=list)  # when folded: [self, copy 1, copy 2, ...]
    folded_into: Call | None = None  # when this call is copy j >= 1 of a folded run

    @property
    def type_name(self) -> str:
        return type(self.module).__name__ if self.module is not None else "Module"

    @property
    def key(self) -> str:
        """A name unique in the tree (nested calls may start, even end, at the same node)."""
        return f"{self.level}_{self.start}_{self.end}"

    @property
    def title(self) -> str:
        """``blocks.0: TransformerBlock``, or the type alone for the model itself."""
        return f"{self.name}: {self.type_name}" if self.name else self.type_name

    def nodes(self) -> list:
        """Every node of this call and of the calls inside it, in run order."""
        found, stack = [], [self]
        while stack:
            call = stack.pop()
            found.extend(call.own_nodes)
            stack.extend(call.children)
        return sorted(found, key=lambda node: node.seq)

    def walk(self):
        """This call and every call inside it, outer before inner."""
        stack = [self]
        while stack:
            call = stack.pop()
            yield call
            stack.extend(reversed(call.children))

    def signature(self) -> tuple:
        """What ran inside, ignoring sizes and names: equal for identical blocks."""
        path = {id(self): self.type_name}
        for call in self.walk():
            for child in call.children:
                path[id(child)] = f"{path[id(call)]}/{child.type_name}"
        return tuple(
            (node.name, path[id(call)], node.seq - self.start)
            for call in self.walk()
            for node in call.own_nodes
        )


@dataclass(eq=False)
class CallTree:
    """The module calls behind a graph: ``roots`` (outermost calls) and ``owner`` (the
    innermost call of each node, by id; nodes run outside any module are absent)."""

    roots: list
    owner: dict

    def calls(self):
        for root in self.roots:
            yield from root.walk()

    def owner_of(self, node: Context) -> Call | None:
        return self.owner.get(id(node))


def module_names(model) -> dict:
    """id(module) -> its dotted path, from ``model.named_modules()`` ({} without a model)."""
    if model is None or not hasattr(model, "named_modules"):
        return {}
    return {id(module): name for name, module in model.named_modules()}


def build_call_tree(nodes: list, names: dict) -> CallTree:
    """The tree of module calls recorded on ``nodes`` (sorted by seq), with their nodes."""
    records, seen = [], set()
    for node in nodes:
        # a node ending several calls lists the innermost first: take outer ones first
        for record in reversed(node.__dict__.get("module_calls", ())):
            module = record.module()
            key = (id(module), record.start, record.end)
            if key not in seen:
                seen.add(key)
                name = names.get(id(module), "") if module is not None else ""
                records.append(Call(module, record.start, record.end, name))
    records.sort(key=lambda call: (call.start, -call.end))  # stable: outer before inner

    roots, open_calls = [], []
    for call in records:
        while open_calls and open_calls[-1].end <= call.start:
            open_calls.pop()
        while open_calls and open_calls[-1].end < call.end:  # overlaps without nesting
            open_calls.pop()
        if open_calls:
            call.parent, call.level = open_calls[-1], open_calls[-1].level + 1
            call.parent.children.append(call)
        else:
            roots.append(call)
        open_calls.append(call)

    owner = _assign_nodes(nodes, records)
    roots = _prune_empty(roots)
    return CallTree(roots, owner)


def _assign_nodes(nodes: list, calls: list) -> dict:
    """Give each node to the innermost call whose range holds it (one sweep in seq order)."""
    owner, open_calls, next_call = {}, [], 0
    for node in nodes:
        while next_call < len(calls) and calls[next_call].start <= node.seq:
            call = calls[next_call]
            next_call += 1
            while open_calls and not _holds(open_calls[-1], call):
                open_calls.pop()
            open_calls.append(call)
        while open_calls and node.seq >= open_calls[-1].end:
            open_calls.pop()
        if open_calls:
            owner[id(node)] = open_calls[-1]
            open_calls[-1].own_nodes.append(node)
    return owner


def _holds(outer: Call, inner: Call) -> bool:
    return outer.start <= inner.start and inner.end <= outer.end


def _prune_empty(calls: list) -> list:
    """Drop calls with no graph node inside (their output was unused, or handed through)."""
    kept = []
    for call in calls:
        call.children = _prune_empty(call.children)
        if call.own_nodes or call.children:
            kept.append(call)
    return kept


@dataclass(eq=False)
class Folding:
    """The result of ``fold_repeats``.

    ``twin``: id(node) -> the node at the same position in copy 0, for nodes of copies 1..N-1
    (follow it repeatedly: a run may sit inside copy 0 of another run).
    ``runs``: id(node) -> [(id of the run's first call, copy index), ...] for every node in a
    copy of a run, copy 0 included.
    """

    twin: dict = field(default_factory=dict)
    runs: dict = field(default_factory=dict)

    def shown(self, node: Context) -> Context:
        """The node drawn for ``node``: itself, or its twin in copy 0 of each run it is in."""
        while id(node) in self.twin:
            node = self.twin[id(node)]
        return node


def fold_repeats(tree: CallTree) -> Folding:
    """Fold runs of identical consecutive sibling calls (see the module docstring)."""
    folding = Folding()
    pending = [tree.roots]
    while pending:
        siblings = pending.pop()
        for run in _identical_runs(siblings):
            first = run[0]
            first.copies = run
            first_nodes = first.nodes()
            for copy_index, copy in enumerate(run):
                copy.folded_into = first if copy_index else None
                for position, node in enumerate(copy.nodes()):
                    folding.runs.setdefault(id(node), []).append((id(first), copy_index))
                    if copy_index:
                        folding.twin[id(node)] = first_nodes[position]
        for call in siblings:
            if call.folded_into is None and call.children:
                pending.append(call.children)
    return folding


def _identical_runs(siblings: list) -> list:
    """Runs of 2+ consecutive siblings, each the same as the first and fed by the one before
    (a stack of blocks; q_proj, k_proj and v_proj side by side are no run)."""
    runs, current = [], []
    for call in siblings:
        if current and _same_structure(current[0], call) and _reads_from(call, current[-1]):
            current.append(call)
            continue
        if len(current) > 1:
            runs.append(current)
        current = [call]
    if len(current) > 1:
        runs.append(current)
    return runs


def _same_structure(first: Call, other: Call) -> bool:
    if first.type_name != other.type_name or first.end - first.start != other.end - other.start:
        return False
    return first.signature() == other.signature()


def _reads_from(call: Call, previous: Call) -> bool:
    made_before = {id(node) for node in previous.nodes()}
    return any(
        id(getattr(arg, "grad_fn", None)) in made_before
        for node in call.nodes()
        for arg in node.inputs
    )
