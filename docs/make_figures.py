"""Regenerate every figure the README shows, into docs/ (or ``--out``).

    python docs/make_figures.py                    everything (several minutes on 2 CPU cores)
    python docs/make_figures.py --only graph attention

What it writes, and the minigrad function that draws it:

    gpt_block_graph.svg/.png   a 2-layer post-LN GPT's graph after one backward pass: shortcuts
                               highlighted, every edge labelled with its gradient norm
                               (models.commands.graph.write_docs_figure)
    attention_grammar.png      attention heatmaps of a GPT trained briefly on the grammar task
                               (examples/04_train_toy_gpt.py, 250 steps), on "사과는 맛있다",
                               the layer whose head looks back at the noun most (viz.plots)
    grammar_loss.png           that run's loss curve (models.plots)
    cross_attention.png        the cross-attention of a Seq2Seq trained on translate
                               (examples/07_translate_with_attention.py, 400 steps): gloss
                               words against Korean words, the verb looking back last
    explorer.png, explorer.html
                               the explorer page (viz.explore) of that model on "사과는 맛있다"
                               after one backward pass, stepped to where the gradient has come
                               back through block 0's attention, its attention node clicked:
                               a screenshot by Debian's headless Chromium (chromium and
                               chromium-driver, driven by selenium)
    depth.png, ln.png, paths.png, scale.png, time.png and study_<name>.md/.json
                               the studies of minigrad.study at their default settings:
                               gradient against depth with and without residuals, post-LN
                               against pre-LN, path lengths, scaled shortcuts, through time
                               (viz.studies)
    sqrt_dk.png, heads.png, qk.png and their study_<name>.md/.json
                               the studies of the claims about attention: scores divided by
                               sqrt(d_k) or not (study scaling), one head against several,
                               separate W_Q, W_K against tied ones (viz.studies)
    sequential.png, bottleneck.png and their study_<name>.md/.json
                               the RNN/LSTM write-up's claims: ops in a row, saved bytes
                               and step time as T grows; accuracy against length for the
                               last-state LSTM, attention and the Transformer (copy and
                               translate)

Every figure comes from fixed seeds, so running the script again redraws the same pictures.
"""

from __future__ import annotations

import argparse
import os
import runpy
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # models/ is imported from the checkout, like the examples

from minigrad import study  # noqa: E402
from minigrad.viz.studies import save_study  # noqa: E402
from models.commands.graph import write_docs_figure  # noqa: E402
from models.commands.study import study_options  # noqa: E402

FIGURES = ("graph", "attention", "cross_attention", "explorer", *study.STUDIES)
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"  # Debian's packages


def graph_figure(out: Path) -> list[Path]:
    return write_docs_figure(out)


def attention_figure(out: Path) -> list[Path]:
    """The model of examples/04_train_toy_gpt.py (the grammar task, 250 steps) and its
    attention on "사과는 맛있다", drawn by that example's own functions."""
    example = runpy.run_path(str(ROOT / "examples" / "04_train_toy_gpt.py"))
    with tempfile.TemporaryDirectory() as folder:
        model, vocab = example["train_grammar"](Path(folder))
        loss = Path(shutil.copy(Path(folder) / "04_loss.png", out / "grammar_loss.png"))
    attention = example["draw_noun_attention"](model, vocab, out / "attention_grammar.png")
    return [attention, loss]


def cross_attention_figure(out: Path) -> list[Path]:
    """The model of examples/07_translate_with_attention.py (translate, 400 steps) and its
    cross-attention on 작은 고양이가 빨간 사과를 먹는다, drawn by that example's functions."""
    example = runpy.run_path(str(ROOT / "examples" / "07_translate_with_attention.py"))
    model, vocab = example["train_translate"]()
    return [example["draw_cross_attention"](model, vocab, out / "cross_attention.png")]


def headless_chromium(width: int = 1500, height: int = 1000):
    """Debian's Chromium, headless, through Debian's chromedriver (selenium): both paths are
    given, so selenium never looks for, let alone downloads, a browser or a driver of its
    own. Raises RuntimeError when either is missing."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not Path(path).is_file()]
    if missing:
        raise RuntimeError(
            f"needs {' and '.join(missing)}: apt-get install chromium chromium-driver"
        )
    os.environ["SE_OFFLINE"] = "true"  # (selenium's manager: never reach the network)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", f"--window-size={width},{height}"):  # fmt: skip
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def explorer_figure(out: Path) -> list[Path]:
    """The explorer page of the model of examples/04_train_toy_gpt.py on "사과는 맛있다", and
    a screenshot of it in the middle of the backward pass."""
    import minigrad as mg

    example = runpy.run_path(str(ROOT / "examples" / "04_train_toy_gpt.py"))
    with tempfile.TemporaryDirectory() as folder:
        model, vocab = example["train_grammar"](Path(folder))
    text = "\n" + "사과는 맛있다"
    ids = vocab.encode_array(text)
    _, loss = model(ids[None, :-1], ids[None, 1:])
    loss.name = "loss"
    with mg.viz.record_grads():
        loss.backward()
    page = mg.viz.explore(loss, params=model, tokens=example["display_tokens"](text[:-1]))
    html_path = page.save(out / "explorer.html")
    return [html_path, screenshot_explorer(html_path, out / "explorer.png")]


def screenshot_explorer(page: Path, png: Path) -> Path:
    """Open the page, step to where the gradient has just come back through block 0's
    attention (past its shortcut and branch), click that attention's weights A, screenshot."""
    browser = headless_chromium(width=1500, height=1200)
    try:
        browser.get(page.resolve().as_uri())
        browser.execute_script(
            """
            const data = JSON.parse(document.getElementById("explorer-data").textContent);
            const first = data.shortcuts[0];
            const moment = Math.max(first.moment, ...first.branch.map((edge) => edge[0]));
            const slider = document.getElementById("step");
            slider.value = moment;
            slider.dispatchEvent(new Event("input"));
            const [key] = Object.entries(data.items).find(
                ([, item]) => (item.equation || "").startsWith("A = softmax"));
            const node = document.querySelector(`g.node[data-key="${key}"]`);
            node.dispatchEvent(new PointerEvent("pointerdown", { bubbles: true }));
            node.dispatchEvent(new PointerEvent("pointerup", { bubbles: true }));
            """
        )
        browser.save_screenshot(str(png))
    finally:
        browser.quit()
    return png


def study_figure(name: str, out: Path) -> list[Path]:
    result = study.run(name, **study_options(name))
    print(f"study {name}: {'PASSED' if result.passed else 'FAILED'} in {result.seconds:.1f} s")
    return save_study(result, out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs"), help="default: docs/")
    parser.add_argument("--only", nargs="+", choices=FIGURES, default=FIGURES, metavar="NAME",
                        help=f"some of: {' '.join(FIGURES)}")  # fmt: skip
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    started = time.perf_counter()
    for name in args.only:
        start = time.perf_counter()
        if name == "graph":
            written = graph_figure(out)
        elif name == "attention":
            written = attention_figure(out)
        elif name == "cross_attention":
            written = cross_attention_figure(out)
        elif name == "explorer":
            written = explorer_figure(out)
        else:
            written = study_figure(name, out)
        for path in written:
            print(f"wrote {path} ({Path(path).stat().st_size / 1024:.0f} KB)")
        print(f"{name}: {time.perf_counter() - start:.1f} s")
    print(f"all figures in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
