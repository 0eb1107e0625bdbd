"""The graph drawing: per-edge gradients, shortcut style, module boxes, folding, rendering."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.autograd.grad_mode import modes
from minigrad.viz import collect_graph, draw_graph, find_shortcuts, format_norm, record_grads
from minigrad.viz.expand import INPUTS, RECIPES
from models import GPT, GPTConfig

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")


def gpt_loss(n_layers=2, norm_first=False, backward=False, d_model=8):
    mg.manual_seed(0)
    config = GPTConfig(
        vocab_size=7, block_size=4, d_model=d_model, n_heads=2, n_layers=n_layers,
        norm_first=norm_first,
    )  # fmt: skip
    model = GPT(config)
    idx = mg.randint(0, 7, (2, 4))
    _, loss = model(idx, idx)
    if backward:
        with record_grads():
            loss.backward()
    return model, loss


def node_lines(dot) -> list:
    """The node statements of a Digraph's source (not edges, not graph/node/edge defaults)."""
    return [
        line
        for line in dot.source.splitlines()
        if re.match(r"\s*\"?[\w.]+\"? \[", line)
        and "->" not in line
        and not re.match(r"\s*(graph|node|edge) \[", line)
    ]


def label_of(line: str) -> str:
    """The label of one statement of a Digraph's source (quoted or not)."""
    found = re.search(r'label=(?:"([^"]*)"|([^ \]]+))', line)
    return (found.group(1) or found.group(2)) if found else ""


def edge_labels(dot) -> list:
    """The numbers in the labels of the edges of a Digraph's source."""
    numbers = []
    for line in dot.source.splitlines():
        if "->" in line and "label=" in line:
            parts = re.split(r"\\[nl]", label_of(line))
            numbers += [part.strip() for part in parts if part.strip() not in ("", "shortcut")]
    return numbers


# -- record_grads: the gradient along each edge ----------------------------------------------


def test_record_grads_is_off_by_default_and_restored():
    assert modes.node_observer is None
    with record_grads():
        assert modes.node_observer is not None
    assert modes.node_observer is None


def test_backward_outside_record_grads_records_nothing():
    x = mg.randn(3, requires_grad=True)
    loss = (x * 2.0).sum()
    loss.backward()
    assert all(node.edge_grad_norms is None for node in collect_graph(loss).nodes)


def residual_float64():
    """y = x + tanh(x W), loss = sum(y^2), with hooks that see every gradient."""
    mg.manual_seed(0)
    x = mg.randn(4, 6, dtype=mg.float64, requires_grad=True)
    weight = mg.randn(6, 6, dtype=mg.float64, requires_grad=True)
    product = x @ weight
    branch = product.tanh()
    y = x + branch
    squared = y**2
    loss = squared.sum()
    seen = {}
    for name, tensor in dict(x=x, weight=weight, product=product, branch=branch, y=y,
                             squared=squared).items():  # fmt: skip
        tensor.register_hook(lambda grad, name=name: seen.__setitem__(name, grad.numpy()))
    with record_grads():
        loss.backward()
    return x, y, loss, seen


def test_the_shortcut_edge_carries_the_upstream_gradient_unchanged():
    x, y, loss, seen = residual_float64()
    (shortcut,) = find_shortcuts(loss)
    carried = shortcut.node.edge_grad_norms[shortcut.skip_position]
    assert abs(carried - np.linalg.norm(seen["y"])) <= 1e-12 * np.linalg.norm(seen["y"])


def test_every_edge_norm_matches_an_independent_hook():
    x, y, loss, seen = residual_float64()
    norm = np.linalg.norm
    # x feeds the shortcut (dL/dy) and the matmul: the matmul's share is dL/dx - dL/dy
    expected = {
        ("Matmul", 0): norm(seen["x"] - seen["y"]),
        ("Matmul", 1): norm(seen["weight"]),
        ("Tanh", 0): norm(seen["product"]),
        ("Add", 0): norm(seen["y"]),
        ("Add", 1): norm(seen["branch"]),
        ("Pow", 0): norm(seen["y"]),
        ("Sum", 0): norm(seen["squared"]),
    }
    graph = collect_graph(loss)
    assert len(graph.edges) == len(expected)
    for edge in graph.edges:
        want = expected[(edge.head.name, edge.position)]
        assert edge.grad_norm == pytest.approx(want, rel=1e-12), (edge.head.name, edge.position)
    # and the drawing labels each edge with that number
    labels = sorted(edge_labels(draw_graph(loss)))
    assert labels == sorted(format_norm(value) for value in expected.values())


def test_gpt_edge_norms_match_hooks():
    """Every tensor read by one op: its edge carries all of its gradient (a hook sees it).
    A tensor read by several: the edge gradients sum to the hook's, so their norms bound it."""
    mg.manual_seed(0)
    model, loss = gpt_loss(backward=False)
    graph = collect_graph(loss)
    seen = {}
    tensors = {id(edge.tensor): edge.tensor for edge in graph.edges if edge.tensor.requires_grad}
    for key, tensor in tensors.items():
        tensor.register_hook(lambda grad, key=key: seen.__setitem__(key, grad.numpy()))
    with record_grads():
        loss.backward()
    readers = graph.consumers()
    checked = 0
    for key, edges in readers.items():
        if key not in tensors:
            continue
        total = np.linalg.norm(seen[key])
        norms = [edge.grad_norm for edge in edges]
        if len(edges) == 1:
            assert norms[0] == pytest.approx(total, rel=1e-5, abs=1e-12)
            checked += 1
        else:
            assert total <= sum(norms) * (1 + 1e-5) + 1e-12
    assert checked > 50


def test_before_any_backward_the_graph_says_no_gradient_yet():
    _, loss = gpt_loss()
    dot = draw_graph(loss)
    assert "no gradient yet" in dot.source
    assert edge_labels(dot) == []


# -- what the drawing shows ------------------------------------------------------------------


def test_parameters_carry_their_module_path_and_modules_their_box():
    model, loss = gpt_loss(backward=True)
    source = draw_graph(loss, fold_repeated=False).source
    for name, _ in model.named_parameters():
        assert name in source
    boxes = re.findall(r"subgraph (cluster_m\w+)", source)
    assert len(boxes) == len(set(boxes)) == 1 + 2 * 3  # GPT; per block: itself, attn, ffn
    assert "blocks.1.attn: MultiHeadAttention" in source


def test_params_as_a_dict_names_the_leaves():
    x = mg.randn(3, 4)
    weight = mg.randn(4, 4, requires_grad=True)
    source = draw_graph((x @ weight).sum(), params={"my_weight": weight}).source
    assert "my_weight" in source


def test_a_params_dict_names_parameters_and_the_model_still_names_the_boxes():
    model, loss = gpt_loss()
    source = draw_graph(loss, params={"the head": model.head.weight}).source
    assert "the head" in source and "head.weight" not in source
    assert "blocks.0 … blocks.1: TransformerBlock ×2" in source


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_attention_nodes_carry_their_equations(norm_first):
    _, loss = gpt_loss(norm_first=norm_first)
    source = draw_graph(loss).source
    for equation in (
        "Q = X W_Q",
        "Q/sqrt(d_k)",
        "S = QK^T/sqrt(d_k)",
        "A = softmax(S)",
        "O = AV",
        "X + O",
    ):
        assert equation in source
    # post-LN replaces X + O by its LayerNorm; pre-LN keeps X + O as the residual stream
    assert ("Z = LayerNorm(X + O)" in source) is (not norm_first)


def test_shortcut_edges_have_their_own_style_and_both_gradients_show():
    _, loss = gpt_loss(backward=True)
    dot = draw_graph(loss, fold_repeated=False)
    shortcut_edges = [line for line in dot.source.splitlines() if "class=shortcut" in line]
    assert len(shortcut_edges) == 4
    for line in shortcut_edges:
        assert label_of(line).split("\\l")[0].strip() == "shortcut"
        assert re.search(r'color="#[0-9a-f]{6}:#ffffff:#[0-9a-f]{6}"', line)  # two strokes
    branch_edges = [line for line in dot.source.splitlines() if "class=branch" in line]
    assert len(branch_edges) == 4


@needs_dot
def test_rendered_svg_of_a_two_layer_gpt_shows_the_shortcuts(tmp_path):
    _, loss = gpt_loss(backward=True)
    path = mg.viz.render(draw_graph(loss, fold_repeated=False), tmp_path / "gpt.svg")
    svg = ET.parse(path).getroot()
    ns = {"svg": "http://www.w3.org/2000/svg"}
    edges = [g for g in svg.iter("{http://www.w3.org/2000/svg}g") if "edge" in g.get("class", "")]
    shortcuts = [g for g in edges if "shortcut" in g.get("class").split()]
    others = [g for g in edges if "shortcut" not in g.get("class").split()]
    assert len(shortcuts) == 4 and len(others) > 40
    for group in shortcuts:
        strokes = [p.get("stroke") for p in group.iter("{http://www.w3.org/2000/svg}path")]
        assert len(strokes) == 3 and strokes[1] == "#ffffff"  # drawn as a double line
        texts = [t.text.strip() for t in group.findall("svg:text", ns)]
        assert "shortcut" in texts
    for group in others:
        assert len(list(group.iter("{http://www.w3.org/2000/svg}path"))) == 1
        assert "shortcut" not in [t.text.strip() for t in group.findall("svg:text", ns)]


def test_a_twelve_block_gpt_at_depth_one_draws_at_most_40_nodes():
    _, loss = gpt_loss(n_layers=12, backward=True)
    dot = draw_graph(loss, depth=1)
    assert len(node_lines(dot)) <= 40
    assert "×12" in dot.source
    assert "blocks.1." not in dot.source  # blocks 1..11 are folded into block 0's box
    assert dot.source.count("class=shortcut") == 2


def test_depth_zero_draws_each_part_of_the_model_as_one_node():
    _, loss = gpt_loss(n_layers=3)
    dot = draw_graph(loss, depth=0)
    assert "TransformerBlock ×3" in dot.source
    assert "2 shortcuts inside each" in dot.source
    assert "class=shortcut" not in dot.source  # the Adds are inside the collapsed blocks
    assert "tok_emb.weight" not in dot.source  # a parameter inside the collapsed tok_emb
    unfolded = draw_graph(loss, depth=0, fold_repeated=False).source
    assert unfolded.count("2 shortcuts inside<") == 3


def test_folding_draws_one_block_and_keeps_the_arrows_in_and_out():
    _, loss = gpt_loss(n_layers=3)
    folded, unfolded = draw_graph(loss), draw_graph(loss, fold_repeated=False)
    assert len(node_lines(folded)) < len(node_lines(unfolded)) / 2
    assert "blocks.0 … blocks.2: TransformerBlock ×3" in folded.source


def test_max_nodes_truncates_with_a_note():
    _, loss = gpt_loss()
    dot = draw_graph(loss, max_nodes=10)
    assert len(node_lines(dot)) <= 10 + 1  # the legend besides
    assert "more nodes not drawn (max_nodes=10)" in dot.source


def test_saved_bytes_per_op():
    x = mg.randn(3, 4, requires_grad=True)
    loss = (x * x).sum()
    source = draw_graph(loss, show_saved_bytes=True).source
    assert "saved 96 B" in source  # Mul keeps both float32 (3, 4) inputs: 2 * 48 bytes


def test_fused_ops_expand_into_their_primitive_steps():
    _, loss = gpt_loss(n_layers=1)
    source = draw_graph(loss, expand_fused=True).source
    for fused in ("Softmax", "LayerNorm", "Gelu", "CrossEntropy"):
        assert f"{fused}: one fused node = these primitive steps" in source
    assert "mu = mean(x)" in source and "y = e / sum_j e_j" in source


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_each_recipe_reads_only_what_exists_before_it(name):
    known = set(INPUTS[name])
    for step, _, reads in RECIPES[name]:
        assert set(reads) <= known, (name, step)
        known.add(step)
    assert RECIPES[name][-1][0] == "y"


def test_user_modules_get_boxes_too():
    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(4, 4)

        def forward(self, x):
            return x + self.inner(x).tanh()

    model = nn.Sequential(Residual(), Residual())
    out = model(mg.randn(2, 4, requires_grad=True)).sum()
    source = draw_graph(out, fold_repeated=False).source
    assert "0: Residual" in source and "1: Residual" in source
    assert "0.inner.weight" in source


# -- rendering -------------------------------------------------------------------------------


def test_without_dot_render_writes_the_source_and_says_how_to_install(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    x = mg.randn(2, requires_grad=True)
    written = mg.viz.render(draw_graph((x * 3.0).sum()), tmp_path / "graph.svg")
    assert written == tmp_path / "graph.dot"
    assert written.read_text().startswith("digraph")
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    assert "apt-get install graphviz" in lines[0] and "brew install graphviz" in lines[0]


@needs_dot
@pytest.mark.parametrize("fmt", ["svg", "png", "pdf"])
def test_render_writes_each_format(tmp_path, fmt):
    x = mg.randn(2, requires_grad=True)
    written = mg.viz.render(draw_graph((x * 3.0).sum()), tmp_path / "graph", format=fmt)
    assert written.suffix == f".{fmt}" and written.stat().st_size > 100


def test_a_digraph_shows_inline_in_jupyter():
    x = mg.randn(2, requires_grad=True)
    assert hasattr(draw_graph((x * 3.0).sum()), "_repr_mimebundle_")


@needs_dot
def test_minigrad_graph_command_writes_an_svg(tmp_path):
    from models.cli import main

    out = tmp_path / "gpt.svg"
    assert main(["graph", "--grads", "--layers", "2", "--d-model", "8", "--out", str(out)]) == 0
    svg = out.read_text()
    assert 'class="edge shortcut"' in svg


@needs_dot
def test_minigrad_graph_draws_a_trained_run(tmp_path):
    from models.cli import main

    run = tmp_path / "run"
    train = ["train", "--steps", "2", "--eval-every", "2", "--layers", "1", "--d-model", "16"]
    assert main([*train, "--heads", "2", "--out", str(run)]) == 0
    out = tmp_path / "trained.svg"
    assert main(["graph", "--run", str(run), "--grads", "--out", str(out)]) == 0
    svg = out.read_text()
    assert svg.count('class="edge shortcut"') == 2
    assert "blocks.0.attn.q_proj.weight" in svg


def test_switches_turn_off_boxes_shortcut_style_and_gradient_labels():
    _, loss = gpt_loss(backward=True)
    plain = draw_graph(loss, cluster_modules=False).source
    assert "subgraph" not in plain and plain.count("class=shortcut") == 4
    quiet = draw_graph(loss, highlight_shortcuts=False, show_grads=False)
    assert "class=shortcut" not in quiet.source and edge_labels(quiet) == []
