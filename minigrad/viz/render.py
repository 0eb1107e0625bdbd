"""Write a drawn graph to a file: SVG, PNG or PDF through Graphviz's ``dot``.

The Python ``graphviz`` package only writes the graph's source; turning it into a picture
needs the ``dot`` program. Without it, ``render`` still writes the source (``.dot``), which
any Graphviz viewer opens, and says in one line how to install Graphviz. In Jupyter a
``graphviz.Digraph`` shows inline by itself (it has ``_repr_mimebundle_``) when ``dot`` is
installed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import graphviz

FORMATS = ("svg", "png", "pdf")
INSTALL_HINT = "install Graphviz (apt-get install graphviz, or brew install graphviz)"


def render(graph: graphviz.Digraph, path, format: str | None = None) -> Path:  # noqa: A002
    """Render ``graph`` to ``path`` ("gpt.svg"; the format is the suffix unless ``format``
    says otherwise). Returns the path written: the picture, or the ``.dot`` source when
    Graphviz's ``dot`` is not installed."""
    path = Path(path)
    format = (format or path.suffix.lstrip(".") or "svg").lower()  # noqa: A001
    if format not in FORMATS:
        raise ValueError(f"render: format must be one of {FORMATS}, got {format!r}")
    if path.suffix.lstrip(".").lower() != format:
        path = path.with_name(f"{path.name}.{format}")
    path.parent.mkdir(parents=True, exist_ok=True)

    if shutil.which("dot") is None:
        return _write_source(graph, path)
    try:
        path.write_bytes(graph.pipe(format=format))
    except graphviz.ExecutableNotFound:
        return _write_source(graph, path)
    return path


def _write_source(graph: graphviz.Digraph, path: Path) -> Path:
    source_path = path.with_suffix(".dot")
    source_path.write_text(graph.source, encoding="utf-8")
    print(
        f"minigrad.viz.render: Graphviz's `dot` was not found, so wrote the graph source to "
        f"{source_path}; to get {path.name}, {INSTALL_HINT} and run "
        f"`dot -T{path.suffix.lstrip('.')} {source_path} -o {path}`"
    )
    return source_path
