"""The explorer page: what it holds (the backward order, each edge's gradient, shortcuts, node
details, attention maps), that it is self-contained and small, and the ``explore`` command."""

from __future__ import annotations

import base64
import json
import re
import shutil

import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd.engine import topological_order
from minigrad.viz import collect_graph, explore, find_shortcuts, format_norm, record_grads
from minigrad.viz.record import thumbnail
from models import GPT, GPTConfig

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")

TOKENS = ["사과", "는", "맛", "있", "다", "!"]


def gpt_loss(n_layers=2, backward=True, retain=None):
    mg.manual_seed(0)
    config = GPTConfig(vocab_size=9, block_size=8, d_model=16, n_heads=2, n_layers=n_layers)
    model = GPT(config)
    idx = mg.randint(0, 9, (1, len(TOKENS)))
    _, loss = model(idx, idx)
    loss.name = "loss"
    if backward:
        with record_grads():
            loss.backward()
    return model, loss


def page_data(page) -> dict:
    found = re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>',
                      page.html, re.S)  # fmt: skip
    return json.loads(found.group(1))


@pytest.fixture(scope="module")
def gpt_page():
    model, loss = gpt_loss()
    page = explore(loss, params=model, tokens=TOKENS)
    return model, loss, page, page_data(page)


def test_the_steps_are_the_order_the_engine_ran_backward(gpt_page):
    _, loss, _, data = gpt_page
    graph = collect_graph(loss)
    engine_order = topological_order(loss.grad_fn)  # the walk of autograd/engine.py
    assert len(data["steps"]) == len(graph.nodes) == len(engine_order)
    by_seq = {node.seq: node for node in graph.nodes}
    ran = [by_seq[int(step["item"][1:])] for step in data["steps"]]  # unfolded: n<seq>
    # folded blocks map copy 1 onto copy 0, so compare where each step is drawn
    drawn = [step["item"] for step in data["steps"]]
    items = data["items"]
    assert all(key in items for key in drawn)
    assert ran[0] is loss.grad_fn  # moment 1: the loss's own node
    assert data["steps"][0]["text"].endswith("CrossEntropy")


def test_the_steps_follow_the_engine_node_by_node_without_folding():
    model, loss = gpt_loss()
    data = page_data(explore(loss, params=model, fold_repeated=False))
    engine_order = topological_order(loss.grad_fn)
    assert [step["item"] for step in data["steps"]] == [f"n{node.seq}" for node in engine_order]


def test_each_arrow_carries_the_norms_record_grads_recorded(gpt_page):
    _, loss, _, data = gpt_page
    by_seq = {node.seq: node for node in collect_graph(loss).nodes}
    moment = {step: k + 1 for k, step in enumerate(s["item"] for s in data["steps"])}
    checked = 0
    for arrow in data["arrows"]:
        expected = []
        for seq, position in arrow["edges"]:
            norm = by_seq[seq].edge_grad_norms[position]
            if norm is not None:
                expected.append(format_norm(norm))
        assert [text for _, text, _ in arrow["norms"]] == expected
        for flowed, _, _ in arrow["norms"]:
            assert 1 <= flowed <= len(data["steps"])
        checked += len(expected)
    assert checked > 50 and moment


def test_an_edge_flows_at_the_moment_its_head_runs_backward():
    model, loss = gpt_loss()
    data = page_data(explore(loss, params=model, fold_repeated=False))
    moment_of = {step["item"]: k + 1 for k, step in enumerate(data["steps"])}
    for arrow in data["arrows"]:
        if arrow["head"] == "output":
            assert arrow["moments"] == [0]  # the seed is there before any node runs
            continue
        assert set(arrow["moments"]) <= {moment_of.get(arrow["head"])}
    # a node's gradient is complete before it runs, and it began to arrive after moment 0
    for key, item in data["items"].items():
        if item["kind"] == "op" and item["received"] is not None and key in moment_of:
            assert item["received"][1] < moment_of[key] or item["received"] == [0, 0]


def test_each_shortcut_hands_dl_dy_unchanged_beside_its_branch(gpt_page):
    _, loss, _, data = gpt_page
    shortcuts = find_shortcuts(loss)
    assert len(data["shortcuts"]) == len(shortcuts) == 4
    for row, shortcut in zip(data["shortcuts"], shortcuts):
        skip_norm = shortcut.node.edge_grad_norms[shortcut.skip_position]
        branch_norm = shortcut.node.edge_grad_norms[shortcut.branch_position]
        assert row["skip"][2] == skip_norm == branch_norm  # an Add hands on dL/dy to both
        assert row["branch"], "the branch reads x somewhere"
        for moment, text, value, reader in row["branch"]:
            assert moment > row["moment"]  # F's nodes run after the sum
            assert text == format_norm(value) and reader
    assert [row["name"] for row in data["shortcuts"]] == [
        "blocks.0: X + O", "blocks.0: X + FFN(X)", "blocks.1: X + O", "blocks.1: X + FFN(X)",
    ]  # fmt: skip
    post_ln_attention = data["shortcuts"][0]["branch"]
    assert [reader for *_, reader in post_ln_attention] == ["Q = X W_Q", "K = X W_K", "V = X W_V"]


def test_a_node_tells_its_op_equation_shapes_saved_bytes_and_attention(gpt_page):
    _, _, _, data = gpt_page
    items = data["items"]
    softmax = next(i for i in items.values() if (i.get("equation") or "") == "A = softmax(S)")
    assert softmax["op"] == "Softmax" and softmax["module"] == "blocks.0.attn"
    assert softmax["shape"] == "(1, 2, 6, 6)" and softmax["dtype"] == "float32"
    assert softmax["saved"] == "288 B"  # its output A, saved for backward: 72 floats
    assert softmax["copies"] == ["blocks.0.attn", "blocks.1.attn"]
    attention = softmax["attention"]
    assert (attention["heads"], attention["rows"], attention["cols"]) == (2, 6, 6)
    assert attention["rowLabels"] == TOKENS == attention["colLabels"]
    maps = np.frombuffer(base64.b64decode(attention["data"]), np.uint8).reshape(2, 6, 6)
    assert np.allclose(maps.sum(axis=-1) / 255, 1.0, atol=0.02)  # each row of A sums to 1
    assert np.all(np.triu(maps[0], 1) == 0)  # causal: no weight on later positions
    params = {i["name"] for i in items.values() if i["kind"] == "param"}
    assert "blocks.0.attn.q_proj.weight" in params and "tok_emb.weight" in params


def test_a_node_gradient_is_the_sum_of_what_arrived_along_its_edges():
    mg.manual_seed(0)
    x = mg.randn(5, 70, requires_grad=True)
    hidden = x.tanh()
    hidden.retain_grad()
    loss = (hidden * 2.0).sum() + (hidden**2).sum()  # hidden is read by two ops
    with record_grads():
        loss.backward()
    data = page_data(explore(loss))
    tanh = next(i for i in data["items"].values() if i.get("op") == "Tanh")
    grad = tanh["grad"]
    pixels = np.frombuffer(base64.b64decode(grad["data"]), np.uint8).astype(float) - 128
    picture = pixels.reshape(grad["rows"], grad["cols"]) / 127 * grad["scale"]
    expected = thumbnail(hidden.grad.array)
    assert picture.shape == expected.shape == (5, 48)  # 70 columns averaged in blocks
    assert np.abs(picture - expected).max() <= grad["scale"] / 127
    assert len(tanh["gradEdges"]) == 2


def test_thumbnails_are_linear_so_edge_pictures_add_up():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 100, 70)), rng.normal(size=(3, 100, 70))
    assert thumbnail(a).shape == (48, 48)
    assert np.allclose(thumbnail(a + b), thumbnail(a) + thumbnail(b))
    # 100 rows -> 48 blocks of 2 or 3 rows (from row 100 k // 48), 70 columns -> 1 or 2
    assert np.isclose(thumbnail(a)[0, 0], a[0, :2, :1].mean())
    assert np.isclose(thumbnail(a)[-1, -1], a[0, 97:, 68:].mean())
    assert thumbnail(np.float32(3.0) * np.ones(())).shape == (1, 1)


def test_before_any_backward_the_page_draws_and_says_no_gradient_yet():
    model, loss = gpt_loss(backward=False)
    page = explore(loss, params=model)
    data = page_data(page)
    assert not data["hasGrads"] and data["steps"] == []
    assert data["noGradient"].startswith("no gradient yet")
    assert "no gradient yet" in page.html and "<svg" in page.html
    assert "no gradient yet" in repr(page)


def test_the_page_is_one_self_contained_file(gpt_page, tmp_path):
    _, _, page, _ = gpt_page
    text = page.html
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=\"(https?:)?//", text)
    assert "@import" not in text and "fetch(" not in text and "XMLHttpRequest" not in text
    assert "사과" in text  # the tokens, as they are
    path = page.save(tmp_path / "deep" / "gpt.html")
    assert path.read_text(encoding="utf-8") == text


def test_in_jupyter_it_shows_inline_in_an_iframe(gpt_page):
    _, _, page, _ = gpt_page
    shown = page._repr_html_()
    assert shown.startswith("<iframe srcdoc=") and "&lt;svg" in shown and "<svg" not in shown


def test_sizes_a_toy_gpt_page_is_small_and_twelve_blocks_fold(gpt_page):
    _, _, page, _ = gpt_page
    assert len(page.html.encode()) < 2 * 1024**2
    model, loss = gpt_loss(n_layers=12)
    deep = explore(loss, params=model)
    data = page_data(deep)
    assert len(data["steps"]) == len(collect_graph(loss).nodes) > 300
    assert len(data["items"]) < 120  # one block drawn for twelve
    assert len(data["shortcuts"]) == 24
    assert len(deep.html.encode()) < 2 * 1024**2


def test_bad_arguments_say_what_is_wrong():
    model, loss = gpt_loss()
    with pytest.raises(ValueError, match="tokens has 3 labels.*6 query"):
        explore(loss, params=model, tokens=["a", "b", "c"])
    with pytest.raises(TypeError, match="a list of labels"):
        explore(loss, tokens="사과는")
    with pytest.raises(TypeError, match="must be a Tensor"):
        explore(np.ones(3))


# -- the command -------------------------------------------------------------------------


def run_cli(*argv):
    from models.cli import main

    return main(list(argv))


def test_explore_command_writes_a_page_after_one_backward(tmp_path, capsys):
    out = tmp_path / "gpt.html"
    assert run_cli("explore", "--prompt", "\n사과는 맛있다", "--out", str(out)) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"wrote {out}") and "no gradient yet" not in printed
    text = out.read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="explorer-data">(.*?)</script>', text, re.S).group(1))
    assert data["hasGrads"] and len(data["shortcuts"]) == 4
    assert data["tokens"] == ["\\n", "사", "과", "는", "_", "맛", "있"]


def test_explore_command_without_backward_says_no_gradient_yet(tmp_path, capsys):
    out = tmp_path / "forward.html"
    assert run_cli("explore", "--no-backward", "--out", str(out)) == 0
    assert "no gradient yet" in capsys.readouterr().out
    assert out.exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--run", "{tmp}/missing"], "no such run folder"),
        (["--out", "{tmp}/a_file/page.html"], "is a file, not a folder"),
        (["--out", "{tmp}"], "is a folder"),
        (["--prompt", "x"], "at least two characters"),
    ],
)
def test_explore_command_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    (tmp_path / "a_file").write_text("not a folder")
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "page.html")]
    assert run_cli("explore", *argv) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1 and "Traceback" not in error


def test_explore_command_open_asks_for_a_browser(tmp_path, capsys, monkeypatch):
    opened = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or False)
    out = tmp_path / "gpt.html"
    assert run_cli("explore", "--open", "--out", str(out)) == 0
    assert opened == [out.resolve().as_uri()]
    assert "found no browser" in capsys.readouterr().out


def test_explore_command_on_a_trained_run(tmp_path):
    run = tmp_path / "run"
    train = ["train", "--steps", "2", "--eval-every", "2", "--layers", "1", "--d-model", "16"]
    assert run_cli(*train, "--heads", "2", "--out", str(run)) == 0
    out = tmp_path / "trained.html"
    assert run_cli("explore", "--run", str(run), "--prompt", "사과는", "--out", str(out)) == 0
    text = out.read_text(encoding="utf-8")
    assert "blocks.0.attn.q_proj.weight" in text and '"hasGrads":true' in text
