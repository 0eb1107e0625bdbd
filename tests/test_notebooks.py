"""The notebooks of examples/notebooks/: each is its example script cut into cells (they must
be what make_notebooks.py makes of the scripts now), and each runs headless without an error,
at the quick settings (QUICK = True put after the settings cell, as papermill does)."""

from __future__ import annotations

import ast
import importlib.util
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "examples" / "notebooks"
NOTEBOOKS = sorted(path.stem for path in FOLDER.glob("0*.ipynb"))

needs = [
    name for name in ("nbformat", "nbclient", "ipykernel") if importlib.util.find_spec(name) is None
]
pytestmark = pytest.mark.skipif(
    bool(needs), reason=f"{', '.join(needs)} not installed (pip install -e '.[dev]')"
)


def maker() -> dict:
    return runpy.run_path(str(FOLDER / "make_notebooks.py"))


def test_there_is_one_notebook_per_example():
    scripts = sorted(path.stem for path in (ROOT / "examples").glob("0*_*.py"))
    assert NOTEBOOKS == scripts and len(scripts) == 8


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_each_notebook_is_its_script_now(name):
    make = maker()
    script = ROOT / "examples" / f"{name}.py"
    expected = make["as_text"](make["build"](script))
    committed = (FOLDER / f"{name}.ipynb").read_text(encoding="utf-8")
    assert committed == expected, (
        f"{name}.ipynb is out of date: run examples/notebooks/make_notebooks.py"
    )
    source = script.read_text(encoding="utf-8")
    notebook = make["build"](script)
    for cell in notebook.cells:  # every function of the script is in a cell, verbatim
        if cell.cell_type == "code" and cell.source.startswith(("def ", "class ")):
            assert cell.source in source


def test_the_check_fails_when_a_notebook_drifts(tmp_path, monkeypatch):
    make = maker()
    assert make["main"](["--check"]) == 0
    script = ROOT / "examples" / "01_autograd_by_hand.py"
    drifted = make["build"](script)
    drifted.cells[4].source += "\n# edited in the notebook only"
    assert make["as_text"](drifted) != (FOLDER / "01_autograd_by_hand.ipynb").read_text("utf-8")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_no_cell_after_the_settings_assigns_a_setting(name):
    """QUICK, OUT and STEPS come from the settings cell alone: a script constant of that name
    would overwrite it (a dict named QUICK would make every run the quick one)."""
    import nbformat

    notebook = nbformat.read(FOLDER / f"{name}.ipynb", as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code" and "parameters" not in cell.metadata.get("tags", []):
            tree = ast.parse(cell.source)
            names = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
                     for t in node.targets if isinstance(t, ast.Name)}  # fmt: skip
            assert not names & {"QUICK", "OUT", "STEPS"}, cell.source[:200]


def test_a_script_constant_named_as_a_setting_is_refused(tmp_path):
    script = tmp_path / "09_clash.py"
    script.write_text('"""09 - A clash."""\n\nQUICK = {"steps": 1}\n\n\ndef main():\n    pass\n')
    with pytest.raises(ValueError, match="QUICK hides the setting"):
        maker()["build"](script)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_each_notebook_runs_headless(name, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(FOLDER / f"{name}.ipynb", as_version=4)
    settings = next(
        i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", [])
    )
    notebook.cells.insert(settings + 1, nbformat.v4.new_code_cell("QUICK = True"))
    client = NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o for o in outputs if "text/html" in o.get("data", {})]
    if name[:2] in ("01", "03", "04"):  # the explorer, inline
        assert any("<iframe srcdoc=" in o["data"]["text/html"] for o in html)
