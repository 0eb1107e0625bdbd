"""The explorer page in a real browser: Debian's headless Chromium, driven by selenium through
Debian's chromedriver (never a browser or driver downloaded). Skipped where they are missing.

The page is a 2-layer GPT's after one backward pass inside ``record_grads``; the test steps it
as a learner would and reads what the page shows.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

import minigrad as mg
from minigrad.viz import collect_graph, explore, find_shortcuts, format_norm, record_grads
from models import GPT, GPTConfig

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
TOKENS = ["\\n", "사", "과", "는", "_", "맛"]

missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not Path(path).is_file()]
pytestmark = [
    pytest.mark.skipif(
        bool(missing),
        reason=f"no system Chromium ({', '.join(missing)} missing): "
        "apt-get install chromium chromium-driver",
    ),
    pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed"),
    pytest.mark.skipif(
        importlib.util.find_spec("selenium") is None, reason="selenium not installed"
    ),
]


def make_figures():
    """docs/make_figures.py, whose ``headless_chromium`` the README's screenshot uses too."""
    spec = importlib.util.spec_from_file_location("make_figures", ROOT / "docs" / "make_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def browser():
    driver = make_figures().headless_chromium(width=1400, height=1000)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    mg.manual_seed(0)
    config = GPTConfig(vocab_size=9, block_size=8, d_model=16, n_heads=2, n_layers=2)
    model = GPT(config)
    idx = mg.randint(0, 9, (1, len(TOKENS)))
    _, loss = model(idx, idx)
    loss.name = "loss"
    with record_grads():
        loss.backward()
    path = explore(loss, params=model, tokens=TOKENS).save(
        tmp_path_factory.mktemp("page") / "p.html"
    )
    return loss, path


def open_page(browser, path: Path) -> None:
    browser.get(path.resolve().as_uri())
    browser.get_log("browser")  # (start each test with an empty console)


def console_errors(browser) -> list:
    return [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def labels_shown(browser) -> dict:
    """arrow id -> the norm rows its label shows now (the rows after "shortcut")."""
    return browser.execute_script(
        """
        const data = JSON.parse(document.getElementById("explorer-data").textContent);
        const shown = {};
        for (const arrow of data.arrows) {
            const g = document.getElementById(arrow.id);
            const texts = Array.from(g.querySelectorAll(":scope > text"));
            shown[arrow.id] = texts.slice(arrow.rows).map((t) => t.textContent.trim());
        }
        return shown;
        """
    )


def page_data(browser) -> dict:
    return browser.execute_script(
        'return JSON.parse(document.getElementById("explorer-data").textContent);'
    )


def expected_label(norms: list) -> list:
    """The rows draw_graph writes for an arrow's recorded norms."""
    texts = [format_norm(norm) for norm in norms]
    if len(texts) <= 3:
        return texts
    return [f"{len(texts)} edges: {format_norm(min(norms))} … {format_norm(max(norms))}"]


def test_the_browser_is_the_system_one(browser):
    assert browser.service.path == CHROMEDRIVER
    assert browser.capabilities["browserName"] in ("chrome", "chromium")


def test_the_page_renders_without_console_errors(browser, gpt):
    _, path = gpt
    open_page(browser, path)
    assert browser.find_element("css selector", "#graph svg g.node").is_displayed()
    assert "moment 0 of" in browser.find_element("id", "moment").text
    browser.find_element("id", "play").click()
    browser.find_element("id", "play").click()  # pause again
    assert console_errors(browser) == []


def test_stepping_to_the_end_shows_every_norm_record_grads_recorded(browser, gpt):
    loss, path = gpt
    open_page(browser, path)
    data = page_data(browser)
    by_seq = {node.seq: node for node in collect_graph(loss).nodes}
    recorded = {
        arrow["id"]: [
            by_seq[seq].edge_grad_norms[position]
            for seq, position in arrow["edges"]
            if by_seq[seq].edge_grad_norms[position] is not None
        ]
        for arrow in data["arrows"]
    }
    # moment 0: no gradient has flowed yet, so no label shows a number
    assert all(row == "" for rows in labels_shown(browser).values() for row in rows)

    forward = browser.find_element("id", "forward")
    for _ in range(3):
        forward.click()
    assert "moment 3 of" in browser.find_element("id", "moment").text
    partly = labels_shown(browser)
    assert 0 < sum(row != "" for rows in partly.values() for row in rows) < len(recorded)

    browser.find_element("id", "last").click()
    assert f"moment {len(data['steps'])} of" in browser.find_element("id", "moment").text
    shown = labels_shown(browser)
    labelled = 0
    for arrow_id, norms in recorded.items():
        if norms:
            assert shown[arrow_id] == expected_label(norms), arrow_id
            labelled += 1
    assert labelled > 40
    assert console_errors(browser) == []


def test_shortcut_edges_are_highlighted_and_carry_dl_dy_unchanged(browser, gpt):
    loss, path = gpt
    open_page(browser, path)
    browser.find_element("id", "last").click()
    styles = browser.execute_script(
        """
        const style = (g) => getComputedStyle(g.querySelector("path"));
        const shortcuts = Array.from(document.querySelectorAll("g.edge.shortcut"));
        const plain = document.querySelector("g.edge:not(.shortcut):not(.branch)");
        return {
            count: shortcuts.length,
            filters: shortcuts.map((g) => style(g).filter),
            widths: shortcuts.map((g) => parseFloat(style(g).strokeWidth)),
            plainWidth: parseFloat(style(plain).strokeWidth),
        };
        """
    )
    # the two blocks fold into one box, drawn as blocks.0: its two shortcuts stand out
    data = page_data(browser)
    drawn = {tuple(edge): arrow["kind"] for arrow in data["arrows"] for edge in arrow["edges"]}
    shortcuts = find_shortcuts(loss)
    assert len(shortcuts) == 4
    kinds = [drawn.get((s.node.seq, s.skip_position)) for s in shortcuts]
    assert kinds == ["shortcut", "shortcut", None, None]  # blocks.1's edges are not drawn
    assert styles["count"] == 2 == sum(arrow["kind"] == "shortcut" for arrow in data["arrows"])
    assert all("drop-shadow" in f for f in styles["filters"])
    assert min(styles["widths"]) > 2 * styles["plainWidth"]

    rows = browser.find_elements("css selector", "#shortcuts tbody tr")
    assert [row.find_elements("tag name", "td")[0].text for row in rows] == [
        "blocks.0: X + O", "blocks.0: X + FFN(X)", "blocks.1: X + O", "blocks.1: X + FFN(X)",
    ]  # fmt: skip
    for row, shortcut in zip(rows, find_shortcuts(loss)):
        upstream = format_norm(shortcut.node.edge_grad_norms[shortcut.skip_position])
        cells = [cell.text for cell in row.find_elements("tag name", "td")]
        assert cells[1] == upstream
        assert cells[2].startswith(upstream) and "unchanged" in cells[2]
        assert "into" in cells[3]  # the branch's edges back to x


def test_clicking_a_node_shows_its_panel(browser, gpt):
    from selenium.webdriver.common.action_chains import ActionChains

    _, path = gpt
    open_page(browser, path)
    browser.find_element("id", "last").click()
    browser.find_element("id", "fit").click()
    data = page_data(browser)
    key = next(k for k, i in data["items"].items() if i.get("equation") == "A = softmax(S)")
    node = browser.find_element("css selector", f'g.node[data-key="{key}"]')
    ActionChains(browser).move_to_element(node).click().perform()

    def field(name):
        return browser.find_element("css selector", f'#panel [data-field="{name}"]').text

    assert field("title") == "A = softmax(S)" and field("op") == "Softmax"
    assert field("module") == "blocks.0.attn (MultiHeadAttention)"
    assert field("shape") == "(1, 2, 6, 6)" and field("dtype") == "float32"
    assert field("saved") == "288 B"
    assert "arrived along" in field("gradient")
    heads = browser.find_elements("css selector", "#panel .maps figure")
    assert [h.text for h in heads] == ["head 0", "head 1"]
    assert (
        len(browser.find_elements("css selector", "#panel canvas")) >= 5
    )  # value, histo, grad, 2 maps

    param = next(k for k, i in data["items"].items() if i["name" if "name" in i else "kind"]
                 == "blocks.0.attn.q_proj.weight")  # fmt: skip
    node = browser.find_element("css selector", f'g.node[data-key="{param}"]')
    ActionChains(browser).move_to_element(node).click().perform()
    assert field("path") == "blocks.0.attn.q_proj.weight"
    assert field("kind") == "parameter"
    assert console_errors(browser) == []


def test_before_any_backward_the_page_says_no_gradient_yet(browser, tmp_path):
    x = mg.randn(3, 4, requires_grad=True)
    loss = (x.tanh() * 2.0).sum()
    path = explore(loss).save(tmp_path / "forward.html")
    open_page(browser, path)
    assert browser.find_element("id", "status").text.startswith("no gradient yet")
    assert not browser.find_element("id", "step").is_enabled()
    assert console_errors(browser) == []


def test_a_screenshot(browser, gpt, tmp_path):
    _, path = gpt
    open_page(browser, path)
    browser.find_element("id", "last").click()
    png = tmp_path / "explorer.png"
    assert browser.save_screenshot(str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
