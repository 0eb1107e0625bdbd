"""models.GPT: parameter names, shapes, loss, generate, and a PyTorch twin that must give the
same logits and the same training losses over 20 AdamW steps (post-LN and pre-LN)."""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from models import GPT, GPTConfig

SMALL = dict(vocab_size=11, block_size=8, d_model=16, n_heads=2, n_layers=2)


def make_gpt(seed: int = 0, **overrides) -> GPT:
    mg.manual_seed(seed)
    return GPT(GPTConfig(**{**SMALL, **overrides}))


def batches(count: int, batch: int = 4, length: int = 8, seed: int = 0):
    """(idx, targets) pairs of random tokens; some targets are ignore_index (-100)."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        tokens = rng.integers(0, SMALL["vocab_size"], size=(batch, length + 1))
        targets = tokens[:, 1:].copy()
        targets[rng.random(targets.shape) < 0.1] = -100
        yield tokens[:, :-1], targets


# -- the model's shape and names ----------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_parameter_names_follow_the_design(norm_first):
    model = make_gpt(norm_first=norm_first, n_layers=2)
    names = [name for name, _ in model.named_parameters()]
    expected = ["tok_emb.weight", "pos_emb.weight"]
    for i in range(2):
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            expected += [f"blocks.{i}.attn.{proj}.weight", f"blocks.{i}.attn.{proj}.bias"]
        expected += [f"blocks.{i}.ln1.weight", f"blocks.{i}.ln1.bias"]
        expected += [f"blocks.{i}.ffn.fc1.weight", f"blocks.{i}.ffn.fc1.bias"]
        expected += [f"blocks.{i}.ffn.fc2.weight", f"blocks.{i}.ffn.fc2.bias"]
        expected += [f"blocks.{i}.ln2.weight", f"blocks.{i}.ln2.bias"]
    if norm_first:
        expected += ["ln_f.weight", "ln_f.bias"]
    expected += ["head.weight", "head.bias"]
    assert names == expected
    assert model.head.weight.shape == (11, 16)
    assert model.head.weight is not model.tok_emb.weight


def test_forward_without_targets_returns_logits_and_none():
    model = make_gpt()
    logits, loss = model(mg.randint(0, 11, (3, 5)))
    assert logits.shape == (3, 5, 11) and logits.dtype == np.float32
    assert loss is None


def test_loss_is_cross_entropy_over_all_counted_positions():
    model = make_gpt()
    idx, targets = next(batches(1))
    logits, loss = model(idx, targets)
    flat = logits.numpy().reshape(-1, 11).astype(np.float64)
    log_probs = flat - np.log(np.exp(flat - flat.max(1, keepdims=True)).sum(1, keepdims=True))
    log_probs -= flat.max(1, keepdims=True)
    counted = targets.reshape(-1) != -100
    picked = log_probs[np.arange(len(flat)), np.where(counted, targets.reshape(-1), 0)]
    assert loss.dtype == np.float32
    assert loss.item() == pytest.approx(-picked[counted].mean(), rel=1e-5)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(d_model=10, n_heads=3), "divisible by n_heads"),
        (dict(n_layers=0), "n_layers must be a positive integer"),
        (dict(vocab_size=2.5), "vocab_size must be a positive integer"),
        (dict(dropout=1.0), "dropout"),
        (dict(activation="swish"), "activation"),
    ],
    ids=["heads", "layers", "vocab", "dropout", "activation"],
)
def test_nonsensical_configs_are_refused_by_name(overrides, message):
    with pytest.raises(ValueError, match=message):
        GPTConfig(**{**SMALL, **overrides})


def test_too_long_input_is_a_clear_error():
    model = make_gpt()
    with pytest.raises(ValueError, match="longer than block_size 8"):
        model(mg.randint(0, 11, (1, 9)))


def test_generate_returns_prompt_then_new_tokens_cropping_the_context():
    model = make_gpt()
    prompt = mg.randint(0, 11, (2, 3))
    mg.manual_seed(5)
    out = model.generate(prompt, max_new_tokens=12)  # 15 tokens > block_size 8
    assert out.shape == (2, 15) and out.dtype == np.int64
    np.testing.assert_array_equal(out.numpy()[:, :3], prompt.numpy())
    assert out.numpy().min() >= 0 and out.numpy().max() < 11
    mg.manual_seed(5)
    np.testing.assert_array_equal(model.generate(prompt, 12).numpy(), out.numpy())


def test_generate_greedy_and_top_1_agree_with_argmax():
    model = make_gpt()
    prompt = mg.randint(0, 11, (2, 4))
    greedy = model.generate(prompt, 3, temperature=0)
    top1 = model.generate(prompt, 3, top_k=1)
    np.testing.assert_array_equal(greedy.numpy(), top1.numpy())
    logits, _ = model(prompt)
    np.testing.assert_array_equal(greedy.numpy()[:, 4], logits.numpy()[:, -1].argmax(-1))


def test_state_dict_round_trip_gives_the_same_logits():
    model, other = make_gpt(seed=0), make_gpt(seed=1)
    idx = mg.randint(0, 11, (2, 6))
    other.load_state_dict(model.state_dict())
    np.testing.assert_array_equal(model(idx)[0].numpy(), other(idx)[0].numpy())


# -- the PyTorch twin ------------------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_gpt_matches_torch_twin_over_20_adamw_steps(norm_first):
    torch = pytest.importorskip("torch")
    from torch_twins import TorchGPT, load_into_torch

    model = make_gpt(seed=3, norm_first=norm_first)
    twin = TorchGPT(model.config)
    load_into_torch(twin, model)

    idx = np.random.default_rng(9).integers(0, 11, size=(3, 8))
    logits_twin = twin(torch.from_numpy(idx))[0].detach().numpy()
    np.testing.assert_allclose(model(idx)[0].numpy(), logits_twin, atol=1e-4)

    optimizer = mg.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    optimizer_twin = torch.optim.AdamW(twin.parameters(), lr=3e-3, weight_decay=0.01)
    losses, losses_twin = [], []
    for tokens, targets in batches(20, seed=1):
        optimizer.zero_grad()
        _, loss = model(tokens, targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

        optimizer_twin.zero_grad()
        _, loss_twin = twin(torch.from_numpy(tokens), torch.from_numpy(targets))
        loss_twin.backward()
        optimizer_twin.step()
        losses_twin.append(loss_twin.item())

    np.testing.assert_allclose(losses, losses_twin, rtol=1e-3)
    assert losses[-1] < losses[0]  # it learned something, so the comparison means something
    twin_state = twin.state_dict()
    for name, value in model.state_dict().items():
        # The key bias adds q . b_k to every score of a row, which softmax ignores: its true
        # gradient is 0, both sides hold float noise (~1e-10), and Adam's m / sqrt(v) turns
        # noise into full-size steps. Every other weight must agree closely.
        if not name.endswith("k_proj.bias"):
            np.testing.assert_allclose(
                value.numpy(), twin_state[name].numpy(), atol=2e-5, err_msg=name
            )
