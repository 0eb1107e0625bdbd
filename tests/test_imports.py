"""The shape of the package, read from its source with ``ast`` (nothing is imported):

- minigrad is built in floors, each importing only from its own floor and the ones below:

      errors, hooks  <  backend  <  tensor, autograd.*  <  rng, cuda, creation, serialization
      <  ops.*  <  nn.*  <  optim.*  <  utils.*  <  minigrad (the package face)  <  study.*
      <  viz.*

  ``minigrad/__init__.py``, the package face, may import anything; as something imported it
  sits above optim (it imports the kernels, which reach optim), so study and viz may use it.
- ``minigrad.fast`` sits beside the floors: it may import any of minigrad, and the floors
  above ops may import it; nothing at or below ops may (the core stays readable without
  it), except that autograd/function.py may import the package ``minigrad.fast`` itself,
  the one seam through which an op finds its kernel.
- No import circles, except among the modules of the core (tensor, autograd.*).
- Nothing in minigrad imports ``models``; only backend.py and minigrad.fast import CuPy.
- The core is short: tensor.py and autograd/*.py (gradcheck.py aside) at most 600 lines,
  backend.py at most 250; and it names no threads, streams or halves.

An import inside a function counts as well (it runs sometime); one under ``if
TYPE_CHECKING:`` does not (it never runs).
"""

from __future__ import annotations

import ast
import collections
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "minigrad"
FACE = "minigrad"
FAST = "minigrad.fast"
SEAM = ("minigrad.autograd.function", FAST)  # the one import of the fast layer by the core

# from the bottom; "x.*" is the package x and every module in it
FLOORS = [
    ("errors and hooks", ["minigrad.errors", "minigrad.hooks", "minigrad.versions"]),
    ("backend", ["minigrad.backend"]),
    ("core", ["minigrad.tensor", "minigrad.autograd.*"]),
    ("creation", ["minigrad.rng", "minigrad.cuda", "minigrad.creation", "minigrad.serialization"]),
    ("ops", ["minigrad.ops.*"]),
    ("nn", ["minigrad.nn.*"]),
    ("optim", ["minigrad.optim.*"]),
    ("utils", ["minigrad.utils.*"]),
    ("the package face", [FACE]),
    ("study", ["minigrad.study.*"]),
    ("viz", ["minigrad.viz.*"]),
]
CORE = "core"
OPS_FLOOR = [name for name, _ in FLOORS].index("ops")
CUPY_IMPORTERS = ["minigrad.backend", "minigrad.fast.*"]

CORE_FILES = sorted(
    [PACKAGE / "tensor.py"]
    + [path for path in (PACKAGE / "autograd").glob("*.py") if path.name != "gradcheck.py"]
)
BUDGETS = [("the core", CORE_FILES, 600), ("backend.py", [PACKAGE / "backend.py"], 250)]
# the speed machinery's words; grad mode's flags are thread-local (``threading.local``, as in
# PyTorch), which is semantics, not speed, so the module name itself is not among them
UNNAMED_IN_THE_CORE = re.compile(r"\b(threads|streams?|halves|helper)\b", re.I)
CORE_AND_OPS_FILES = sorted(
    [PACKAGE / "tensor.py", *(PACKAGE / "autograd").glob("*.py"), *(PACKAGE / "ops").glob("*.py")]
)


# -- reading the imports ------------------------------------------------------------------


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def in_group(module: str, patterns) -> bool:
    """Whether ``module`` is one of ``patterns`` ("a.b", or "a.b.*" for a.b and below)."""
    for pattern in patterns:
        if pattern.endswith(".*"):
            package = pattern[:-2]
            if module == package or module.startswith(package + "."):
                return True
        elif module == pattern:
            return True
    return False


class _Imports(ast.NodeVisitor):
    """The imports of one module, wherever they stand, but under ``if TYPE_CHECKING:``: as
    (line, the name imported from: "a.b", the names imported: [...] or None for ``import``)."""

    def __init__(self):
        self.found = []

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
        if name == "TYPE_CHECKING":
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((node.lineno, 0, alias.name, None))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        names = [alias.name for alias in node.names]
        self.found.append((node.lineno, node.level, node.module or "", names))


def _absolute(module: str, level: int, name: str) -> str:
    """The absolute name of ``from <level dots><name> import ...`` in ``module``."""
    if level == 0:
        return name
    package = module if is_package(module) else module.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{name}" if name else package


def _known(name: str) -> str | None:
    """The minigrad module ``name`` loads: itself, or the nearest package above it."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> list:
    """(line, imported): each minigrad module, or outside top-level name ("numpy", "cupy",
    "models"), that ``module`` imports; ``from a.b import c`` imports a.b.c where that is a
    module, else a.b."""
    reader = _Imports()
    reader.visit(ast.parse(MODULES[module].read_text(), str(MODULES[module])))
    found = []
    for line, level, name, names in reader.found:
        base = _absolute(module, level, name)
        if base.split(".")[0] != "minigrad":
            found.append((line, base.split(".")[0]))
            continue
        if names is None:
            found.append((line, _known(base)))
            continue
        for imported in names:
            full = f"{base}.{imported}"
            found.append((line, full if full in MODULES else _known(base)))
    return found


GRAPH = {module: imports_of(module) for module in MODULES}


def arrows():
    """(importer, imported, line) for every import of one minigrad module by another."""
    for module, found in GRAPH.items():
        for line, imported in found:
            if imported in MODULES and imported != module:
                yield module, imported, line


def where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(PACKAGE.parent)}:{line}"


def report(violations: list, what: str) -> str:
    return f"{len(violations)} {what}:\n  " + "\n  ".join(violations)


def test_the_import_reader_skips_type_checking_blocks_only():
    reader = _Imports()
    reader.visit(
        ast.parse(
            "if TYPE_CHECKING:\n    import cupy\nelse:\n    import numpy\n"
            "if typing.TYPE_CHECKING:\n    import cupyx\n"
            "def f():\n    from .x import y\n"
        )
    )
    assert [(level, name, names) for _, level, name, names in reader.found] == [
        (0, "numpy", None),
        (1, "x", ["y"]),
    ]


def test_the_import_reader_sees_what_it_should():
    # the checks below are only as good as this reading of the source
    def imported_by(module):
        return {imported for _, imported in GRAPH[module]}

    assert {FAST, "minigrad.tensor"} <= imported_by("minigrad.autograd.function")  # (at the end)
    assert {"minigrad.errors", "cupy"} <= imported_by("minigrad.backend")  # inside functions
    kernels = imported_by("minigrad.fast.kernels")  # from minigrad.fast import activation, ...
    assert {"minigrad.fast.activation", "minigrad.fast.adam"} <= kernels
    assert "minigrad.ops" in imported_by("minigrad.nn.functional")  # from minigrad.ops import f
    assert _absolute("minigrad.nn.linear", 1, "module") == "minigrad.nn.module"
    assert _absolute("minigrad.nn", 2, "ops") == "minigrad.ops"  # (nn is a package)


# -- floors -------------------------------------------------------------------------------


def floor_of(module: str):
    """(position from the bottom, floor's name), or None for the fast layer."""
    if in_group(module, [FAST + ".*"]):
        return None
    for position, (name, patterns) in enumerate(FLOORS):
        if in_group(module, patterns):
            return position, name
    raise LookupError(module)


def test_every_module_has_a_place():
    unplaced = []
    for module in MODULES:
        try:
            floor_of(module)
        except LookupError:
            unplaced.append(f"{module}: on no floor (add it to FLOORS in tests/test_imports.py)")
    assert not unplaced, report(unplaced, "modules without a floor")


def floor_violation(importer: str, imported: str) -> str | None:
    """Why ``importer`` may not import ``imported``, or None if it may."""
    if importer == FACE:
        return None
    here, there = floor_of(importer), floor_of(imported)
    if there is None:  # the fast layer
        if here is None or here[0] > OPS_FLOOR or (importer, imported) == SEAM:
            return None
        return f"the {here[1]} floor may not use minigrad.fast (only {SEAM[0]} -> {SEAM[1]})"
    if here is None:  # the fast layer may import any of minigrad
        return None
    if there[0] > here[0]:
        return f"an arrow up the floors: {here[1]} imports {there[1]}"
    return None


def test_no_import_goes_up_the_floors():
    violations = []
    for importer, imported, line in arrows():
        why = floor_violation(importer, imported)
        if why is not None:
            violations.append(f"{where(importer, line)}: {importer} -> {imported}: {why}")
    assert not violations, report(violations, "imports against the floors")


@pytest.mark.parametrize(
    "outside, allowed",
    [("models", []), ("cupy", CUPY_IMPORTERS), ("cupyx", CUPY_IMPORTERS)],
)
def test_outside_packages_are_imported_only_where_allowed(outside, allowed):
    violations = [
        f"{where(module, line)}: {module} imports {outside}"
        for module, found in GRAPH.items()
        for line, imported in found
        if imported == outside and not in_group(module, allowed)
    ]
    assert not violations, report(violations, f"imports of {outside}")


@pytest.mark.parametrize(
    "importer, imported, allowed",
    [
        ("minigrad.ops.linalg", "minigrad.fast.linalg", False),
        ("minigrad.tensor", "minigrad.fast", False),
        ("minigrad.autograd.function", "minigrad.fast", True),  # the seam
        ("minigrad.autograd.function", "minigrad.fast.threads", False),  # the seam only
        ("minigrad.nn.parallel", "minigrad.fast.threads", True),
        ("minigrad.optim.adam", "minigrad.fast", True),
        ("minigrad.fast.adam", "minigrad.optim.adam", True),
        ("minigrad.tensor", "minigrad.nn.module", False),
        ("minigrad.nn.module", "minigrad.tensor", True),
        ("minigrad.nn.linear", "minigrad.nn.module", True),  # within a floor
        ("minigrad.backend", "minigrad.errors", True),
        ("minigrad.study.common", "minigrad", True),
        ("minigrad.nn.module", "minigrad", False),
        ("minigrad", "minigrad.viz", True),
    ],
)
def test_the_floor_rules_read_as_stated(importer, imported, allowed):
    assert (floor_violation(importer, imported) is None) is allowed


# -- circles ------------------------------------------------------------------------------


def reachable(graph: dict, start: str) -> set:
    seen, todo = set(), [start]
    while todo:
        for child in graph[todo.pop()] - seen:
            seen.add(child)
            todo.append(child)
    return seen


def circles_of(graph: dict) -> list:
    """The groups of modules that import each other, round a circle (each a set)."""
    reach = {node: reachable(graph, node) for node in graph}
    groups = {frozenset(m for m in reach[node] if node in reach[m]) for node in graph}
    return [set(group) for group in groups if group]


def shortest_circle(graph: dict, start: str) -> list:
    """The shortest path start -> ... -> start (breadth first)."""
    parent = {start: None}
    queue = collections.deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node]):
            if child == start:
                path = [node]
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if child not in parent:
                parent[child] = node
                queue.append(child)
    return []


def test_no_import_circles_but_within_the_core():
    graph = {module: set() for module in MODULES}
    for importer, imported, _ in arrows():
        graph[importer].add(imported)
    core = {m for m in MODULES if floor_of(m) is not None and floor_of(m)[1] == CORE}
    circles = []
    for group in sorted(circles_of(graph), key=sorted):
        outside = sorted(group - core)
        if not outside:
            continue
        circles.append(
            " -> ".join(shortest_circle(graph, outside[0]))
            + f"\n    (one of the circles among {len(group)} modules, {len(outside)} of them"
            f" outside the core: {', '.join(outside)})"
        )
    assert not circles, report(circles, "import circles outside the core")


# -- the core's size and words ------------------------------------------------------------


def count_lines(path: Path) -> int:
    return len(path.read_text().splitlines())


@pytest.mark.parametrize("what, files, budget", BUDGETS, ids=[b[0] for b in BUDGETS])
def test_the_core_keeps_to_its_line_budget(what, files, budget):
    counts = {path.relative_to(PACKAGE.parent).as_posix(): count_lines(path) for path in files}
    total = sum(counts.values())
    assert total <= budget, (
        f"{what}: {total} lines, {total - budget} over its budget of {budget}: "
        + ", ".join(f"{name} {lines}" for name, lines in counts.items())
    )


def test_the_core_and_the_ops_name_no_threads_streams_or_halves():
    found = []
    for path in CORE_AND_OPS_FILES:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            match = UNNAMED_IN_THE_CORE.search(line)
            if match:
                name = path.relative_to(PACKAGE.parent).as_posix()
                found.append(f"{name}:{number}: {match.group(0)!r} in {line.strip()!r}")
    assert not found, report(found, "lines that name threads, streams or halves")
