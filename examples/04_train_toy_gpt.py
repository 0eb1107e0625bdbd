"""04 - Train a toy GPT on the grammar task, and see what its attention learned.

The task (``models.data.grammar``) is a stream of short Korean sentences, "사과는 맛있다":
noun + topic particle + predicate. Both the particle (는 after a vowel, 은 after a final
consonant: 사과는, 수박은) and the predicate (foods are 맛있다, a skill shot is 잘 맞췄다, ...)
depend on the noun, so a character model can only get them right by looking back at the noun.
That looking back is attention.

What to look at:

1. The loss falling, then the particle and predicate accuracies of the model's own
   completions, and a few samples ("\\n사과" -> "사과는 맛있다").
2. Where the model looks when it chooses the predicate. It predicts the next character, so
   the predicate is chosen at the space after the particle ("사과는 " -> "맛"). The script
   measures, over every noun of the task, how much attention that query position puts on the
   noun's characters, in every layer and head, and draws the heatmaps of the layer with the
   head that looks at the noun most (rows: query position, columns: key position; each row
   sums to 1, and the upper triangle is empty because the model is causal).

Training uses the same API as ``minigrad train`` (``models.train.train``), with a shorter
budget. On 2 CPU cores the default settings take about half a minute.

Run:  python examples/04_train_toy_gpt.py [--steps N] [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import numpy as np

from minigrad.viz.plots import attention_maps, plot_model_attention, save_figure
from models.config import config_for_task
from models.data.grammar import noun_classes, sentence
from models.sample import load_model
from models.train import train

PROMPT_NOUN = "사과"


def display_tokens(text: str) -> list[str]:
    """One tick label per character; the newline as \\n and the space as _."""
    return ["\\n" if c == "\n" else "_" if c == " " else c for c in text]


def noun_attention(model, vocab) -> np.ndarray:
    """(layers, heads): the attention weight from the predicate-choosing position (the space
    after the particle) to the noun's characters, averaged over every noun of the task."""
    per_noun = []
    for noun in noun_classes():
        text = "\n" + sentence(noun, "")  # "\n사과는 ": its last position picks the predicate
        ids = np.array(vocab.encode(text), dtype=np.int64)
        maps = attention_maps(model, ids)  # [(name, (heads, T, T)), ...]
        noun_keys = slice(1, 1 + len(noun))
        per_noun.append([weights[:, -1, noun_keys].sum(axis=-1) for _, weights in maps])
    return np.mean(per_noun, axis=0)


def train_grammar(out: Path, steps: int = 250, quick: bool = False):
    """Train the grammar task (``quick``: a tiny model, 30 steps); print what it learned.
    Returns the trained GPT and its vocabulary; the loss curve goes to out/04_loss.png."""
    steps = 30 if quick else steps
    smaller = {"d_model": 32, "n_heads": 2, "batch_size": 16} if quick else {}
    config = config_for_task(
        "grammar", steps=steps, eval_every=steps, warmup_steps=min(100, steps // 5), **smaller
    )
    with tempfile.TemporaryDirectory() as folder:
        result = train(config, out=Path(folder) / "grammar", progress=False, echo=print)
        print(f"trained {result.step} steps in {result.wall_s:.1f} s")
        for name in ("particle_acc", "predicate_acc"):
            print(f"{name} = {result.metrics[name]:.3f}")
        print("samples (prompt + completion):")
        for text in result.samples:
            print(f"   {text.strip()}")
        model, vocab = load_model(result.run.path)
        if result.run.plot_path.exists():
            shutil.copy(result.run.plot_path, out / "04_loss.png")
            print(f"wrote {out / '04_loss.png'}")
    return model, vocab


def draw_noun_attention(model, vocab, path: Path, dpi: int = 120) -> Path:
    """Print where the predicate looks, then draw the heatmaps of the layer whose best head
    looks at the noun most, on "사과는 맛있다"."""
    weights = noun_attention(model, vocab)
    print("attention from the position that picks the predicate to the noun's characters,")
    print("averaged over all nouns (rows: layers, columns: heads):")
    print(np.array2string(weights, precision=2))
    layer, head = np.unravel_index(np.argmax(weights), weights.shape)
    print(f"most attentive: layer {layer} head {head}, weight on the noun {weights.max():.2f}")

    text = "\n" + sentence(PROMPT_NOUN, "맛있다")
    ids = np.array(vocab.encode(text), dtype=np.int64)
    figure = plot_model_attention(
        model,
        ids,
        display_tokens(text),
        layer=int(layer),
        title=f"trained attention, layer {layer}: when picking the predicate (row _), head "
        f"{head} looks back at the noun",
    )
    for ax in figure.axes:  # one character per tick: upright reads better than turned
        ax.tick_params(axis="x", labelrotation=0)
    return save_figure(figure, path, dpi=dpi)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="examples/out", help="where the figures go")
    parser.add_argument("--steps", type=int, default=250, help="training steps (default 250)")
    parser.add_argument("--quick", action="store_true", help="a tiny model, 30 steps")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    model, vocab = train_grammar(out, args.steps, args.quick)
    path = draw_noun_attention(model, vocab, out / "04_attention.png")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
