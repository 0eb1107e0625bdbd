"""Write the learning path as notebooks, one per example script, made from the script itself.

    python examples/notebooks/make_notebooks.py          rewrite every notebook
    python examples/notebooks/make_notebooks.py --check  exit 1 if one differs from its script

Each notebook is its script cut into cells, so the two cannot drift apart (a test runs
``--check``'s comparison): the docstring as the first text cell, then the imports, the
constants, each function and class in a cell of its own, then the body of ``main`` with its
command-line options read from one settings cell (``QUICK``, ``OUT``, ``STEPS``), a cell for
each paragraph. Around them the notebook adds what a page can show and a terminal cannot: the
figures inline and, in 01, 03 and 04, the explorer page (``mg.viz.explore``) of the graph.
"""

from __future__ import annotations

import argparse
import ast
import sys
import textwrap
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent

INSTALL = """\
# minigrad must be importable: in a checkout, `pip install -e .` from its root; on Colab,
# `%pip install "git+URL"` with the URL of minigrad's repository, then restart the runtime
"""

SETTINGS = """\
QUICK = False  # True: the short settings the tests use
OUT = "out"  # where the figures are saved
STEPS = 250  # training steps (04)"""

EXPLORER = (
    "**The explorer.** Press ▶ (or drag the slider) to run the backward pass node by node: "
    "each node lights up when its gradient has arrived, each edge shows the norm of the "
    "gradient that flowed along it. Click a node for its op, shapes, value and gradient; "
    "drag to pan, the wheel zooms."
)

# what each notebook adds after the cell of main whose code holds the key (in order)
EXTRAS = {
    "01_autograd_by_hand": [
        ("for loss, name in", "The scalar graph, inline:", "mg.viz.draw_graph(scalar_loss)"),
        ("for loss, name in", EXPLORER + " In the scalar graph, watch the multiply node "
         "send a and b each the other operand times the upstream gradient.",
         "mg.viz.explore(scalar_loss)"),
        ("for loss, name in", "The tensor layer L = sum(tanh(X W + b)):",
         "mg.viz.explore(tensor_loss)"),
    ],
    "02_attention_step_by_step": [
        ("save_figure(figure", "The heatmap, inline:", "figure"),
    ],
    "03_add_and_norm": [
        ("share =", EXPLORER + " At the sum X + O the shortcut hands dL/dY to X unchanged; "
         "the table under the graph puts it beside what the branch hands back to X.",
         """\
mg.manual_seed(0)
block = AddNorm(residual=True).double()
x = mg.randn(1, T, D_MODEL, dtype=np.float64, requires_grad=True)
x.name = "X"
loss = (block(x) * mg.randn(1, T, D_MODEL, dtype=np.float64)).sum()
loss.name = "L"
with mg.viz.record_grads():
    loss.backward()
mg.viz.explore(loss, params=block)"""),
    ],
    "04_train_toy_gpt": [
        ("draw_noun_attention(", "The attention heatmaps, inline:",
         "from IPython.display import Image\n\nImage(filename=str(path))"),
        ("draw_noun_attention(", EXPLORER + " This is the trained model on 사과는 맛있다: "
         "click the A = softmax(S) node for each head's attention map, labelled with the "
         "characters, and compare what block 0's two shortcuts hand back with their branches.",
         """\
import minigrad as mg

text = "\\n" + sentence(PROMPT_NOUN, "맛있다")
ids = vocab.encode_array(text)
_, loss = model(ids[None, :-1], ids[None, 1:])
loss.name = "loss"
with mg.viz.record_grads():
    loss.backward()
mg.viz.explore(loss, params=model, tokens=display_tokens(text[:-1]))"""),
    ],
    "05_residual_studies": [
        ("for name, options in", "The figures, inline:",
         "from IPython.display import Image\n\n"
         "for name in settings:\n    display(Image(filename=str(folder / f\"{name}.png\")))"),
    ],
    "06_rnn_lstm_attention": [
        ("for path in save_study", "The figure, inline:",
         "from IPython.display import Image\n\n"
         "Image(filename=str(Path(OUT) / \"06_time\" / \"time.png\"))"),
    ],
    "07_translate_with_attention": [
        ("draw_cross_attention(", "The cross-attention map, inline: the row of *eats* "
         "lights up at 먹는다, the last Korean word, then *red* and *apple* go back.",
         "from IPython.display import Image\n\nImage(filename=str(path))"),
    ],
}  # fmt: skip

OPTIONS = {"args.quick": "QUICK", "args.out": "OUT", "args.steps": "STEPS"}


def scripts() -> list[Path]:
    return sorted(EXAMPLES.glob("0*_*.py"))


def build(script: Path) -> nbformat.NotebookNode:
    """The notebook of one example script."""
    source = script.read_text(encoding="utf-8")
    lines = source.splitlines()
    module = ast.parse(source)
    notebook = nbformat.v4.new_notebook()
    cells = notebook.cells
    cells.append(nbformat.v4.new_markdown_cell(_docstring_markdown(module)))
    cells.append(nbformat.v4.new_code_cell(INSTALL + _imports(module, lines)))
    cells.append(nbformat.v4.new_code_cell(SETTINGS, metadata={"tags": ["parameters"]}))
    assigned = [node for node in module.body if isinstance(node, ast.Assign)]
    for name in {t.id for node in assigned for t in node.targets if isinstance(t, ast.Name)}:
        if name in OPTIONS.values():  # the settings cell's name would be overwritten
            raise ValueError(f"{script.name}: a constant named {name} hides the setting")
    constants = [_text(lines, node) for node in assigned]
    if constants:
        cells.append(nbformat.v4.new_code_cell("\n".join(constants)))
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name != "main":
            cells.append(nbformat.v4.new_code_cell(_text(lines, node)))

    extras = list(EXTRAS.get(script.stem, []))
    cells.append(nbformat.v4.new_markdown_cell("## Run it (the body of `main`)"))
    for paragraph in _main_paragraphs(module, lines):
        cells.append(nbformat.v4.new_code_cell(paragraph))
        while extras and extras[0][0] in paragraph:
            _, text, code = extras.pop(0)
            cells.append(nbformat.v4.new_markdown_cell(text))
            cells.append(nbformat.v4.new_code_cell(code))
    if extras:
        raise ValueError(f"{script.name}: main has no cell with {extras[0][0]!r}")
    notebook.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for index, cell in enumerate(cells):  # stable ids: the notebooks are compared as text
        cell["id"] = f"{script.stem[:2]}-{index:02d}"
    return notebook


def _docstring_markdown(module: ast.Module) -> str:
    title, _, body = ast.get_docstring(module).partition("\n")
    number, _, rest = title.partition(" - ")
    return f"# {number} · {rest}\n{body}"


def _imports(module: ast.Module, lines: list) -> str:
    """The script's imports in its groups (a blank line between two), without ``from
    __future__`` and argparse, which a notebook does not need."""
    imports = [node for node in module.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    if not imports:
        return ""
    dropped = {i for node in imports if not _is_import(node)
               for i in range(node.lineno - 1, node.end_lineno)}  # fmt: skip
    span = range(imports[0].lineno - 1, imports[-1].end_lineno)
    text = "\n".join(lines[i] for i in span if i not in dropped)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.strip("\n")


def _is_import(node) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.module != "__future__"
    return isinstance(node, ast.Import) and all(alias.name != "argparse" for alias in node.names)


def _text(lines: list, node) -> str:
    start = node.lineno - 1 - len(getattr(node, "decorator_list", []))
    return "\n".join(lines[start : node.end_lineno])


def _main_paragraphs(module: ast.Module, lines: list) -> list[str]:
    """The statements of main after its options are parsed, as cells split at blank lines,
    with ``args.out`` and friends read from the settings cell."""
    main = next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    body = [n for n in main.body if not _is_option_parsing(n)]
    text = "\n".join(lines[body[0].lineno - 1 : main.end_lineno])
    text = textwrap.dedent(text)
    for option, setting in OPTIONS.items():
        text = text.replace(option, setting)
    return [part.strip("\n") for part in text.split("\n\n") if part.strip()]


def _is_option_parsing(node) -> bool:
    code = ast.unparse(node)
    return "argparse" in code or "parser." in code or code.startswith("parser")


def notebook_path(script: Path) -> Path:
    return HERE / f"{script.stem}.ipynb"


def as_text(notebook) -> str:
    return nbformat.writes(notebook) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    stale = []
    for script in scripts():
        path, text = notebook_path(script), as_text(build(script))
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
            continue
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    if stale:
        print(f"out of date with their scripts: {', '.join(stale)}; run {Path(__file__).name}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
