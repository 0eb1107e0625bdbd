"""07 - Translate with an encoder-decoder, and watch the decoder look back at the source.

The task (``models.data.translate``) turns the Korean sentences of the grammar task into an
English-like gloss. Korean puts the verb last and marks roles with particles; the gloss puts
the verb second:

    작은 고양이가 빨간 사과를 먹는다   ->   small cat eats red apple

An encoder-decoder Transformer (``models.Seq2Seq``) reads the whole Korean sentence with its
encoder; the decoder writes the gloss word by word, and at each word its cross-attention,
softmax(Q K^T / sqrt(d_k)) with Q from the decoder and K, V from the encoder's output, says
where in the source it looks.

What to look at:

1. The exact match and token accuracy on held-out sentences, and a few translations.
2. The cross-attention map (rows: the gloss word being written, columns: the Korean words).
   The order is not a diagonal: writing "eats", the decoder jumps to the last Korean word,
   먹는다; writing "red" and "apple", it goes back to 빨간 and 사과를. The script prints
   where each gloss word looks most.

Training uses ``minigrad train``'s API (``models.train.train``). On 2 CPU cores the default
settings take about 40 seconds.

Run:  python examples/07_translate_with_attention.py [--steps N] [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

import minigrad as mg
from minigrad.viz.plots import font_family, save_figure
from models.config import config_for_task
from models.data import TranslateTask
from models.sample import load_model
from models.train import train

SENTENCE, GLOSS = "작은 고양이가 빨간 사과를 먹는다", "small cat eats red apple"


def train_translate(steps: int = 400, quick: bool = False):
    """Train the default Seq2Seq on translate (``quick``: a tiny one, 40 steps); print how
    well it translates. Returns the model and its word vocabulary."""
    steps = 40 if quick else steps
    smaller = {"d_model": 32, "n_heads": 2, "batch_size": 32} if quick else {}
    config = config_for_task(
        "translate", steps=steps, eval_every=steps, warmup_steps=min(100, steps // 5), **smaller
    )
    with tempfile.TemporaryDirectory() as folder:
        result = train(config, out=Path(folder) / "translate", progress=False, echo=print)
        print(f"trained {result.step} steps in {result.wall_s:.1f} s")
        for name in ("exact_match", "token_acc"):
            print(f"{name} = {result.metrics[name]:.3f}")
        print("translations of held-out sentences:")
        for text in result.samples:
            print(f"   {text}")
        model, vocab = load_model(result.run.path)
    return model, vocab


def cross_attention(model, vocab, sentence: str, gloss: str) -> np.ndarray:
    """The decoder's cross-attention while it writes ``gloss`` (fed the words before each
    one, as in training) for ``sentence``: (gloss words + </s>, source words), averaged over
    the heads of the last decoder block."""
    src = mg.tensor([vocab.encode(sentence)])
    tgt_in = mg.tensor([[vocab.bos_id, *vocab.encode(gloss)]])  # row t writes gloss word t
    with mg.no_grad():
        model.eval()(src, tgt_in)
    return model.cross_attention_maps()[-1].numpy()[0].mean(axis=0)  # (T, S)


def draw_cross_attention(
    model, vocab, path: Path, sentence: str = SENTENCE, gloss: str = GLOSS
) -> Path:
    """Print the model's translation and where each gloss word looks, and draw the map:
    gloss words against Korean words."""
    translation = vocab.decode(model.generate(mg.tensor([vocab.encode(sentence)]), 16).numpy()[0])
    print(f"{sentence}  ->  {translation}   (the reference: {gloss})")
    weights = cross_attention(model, vocab, sentence, gloss)
    source, gloss = sentence.split(), gloss.split() + ["</s>"]
    print("writing each word of the reference, the decoder looks most at:")
    for word, row in zip(gloss, weights):
        looked = int(row.argmax())
        print(
            f"   {word:10s} <- {source[looked]} (source word {looked + 1}, weight {row.max():.2f})"
        )

    from matplotlib.figure import Figure

    family = font_family()
    figure = Figure(
        figsize=(1.2 + 0.9 * len(source), 1.0 + 0.45 * len(gloss)), layout="constrained"
    )
    ax = figure.add_subplot()
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(source)), source, fontfamily=family)
    ax.set_yticks(range(len(gloss)), gloss, fontfamily=family)
    ax.set_xlabel("Korean source (what the encoder read)", fontfamily=family)
    ax.set_ylabel("gloss word being written", fontfamily=family)
    ax.set_title("cross-attention of the last decoder block (mean over heads)", fontsize=10)
    figure.colorbar(image, ax=ax, shrink=0.8)
    return save_figure(figure, path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="examples/out", help="where the figure goes")
    parser.add_argument("--steps", type=int, default=400, help="training steps (default 400)")
    parser.add_argument("--quick", action="store_true", help="a tiny model, 40 steps")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    model, vocab = train_translate(args.steps, args.quick)
    task = TranslateTask()
    print(f"(the task: {len(task.vocab)} words, sentences of {task.min_length} to "
          f"{task.max_length} content words)")  # fmt: skip

    path = draw_cross_attention(model, vocab, out / "07_cross_attention.png")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
