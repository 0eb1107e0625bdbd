"""The translate task (Korean SOV with particles -> SVO gloss) and `minigrad train --task
translate` / `minigrad sample` on a tiny budget."""

from __future__ import annotations

import json

import numpy as np
import pytest

import minigrad as mg
from models.cli import main
from models.config import config_for_task
from models.data import IGNORE, TranslateTask, make_task, sentence_pairs
from models.data.translate import (
    NOUNS,
    VERBS,
    WordVocab,
    content_words,
    object_particle,
    subject_particle,
)
from models.errors import UsageError
from models.train import train


def test_the_seed_sentence():
    task = TranslateTask()
    assert "사과는" in task.vocab.stoi and "apple" in task.vocab.stoi
    pairs = dict(sentence_pairs(2000, 2, seed=0))
    assert pairs["사과는 맛있다"] == "apple is tasty"
    assert pairs["수박은 맛있다"] == "watermelon is tasty"  # 은 after a final consonant


@pytest.mark.parametrize("length", [2, 3, 5, 8, 16])
def test_length_counts_content_words_and_pairs_repeat_by_seed(length):
    pairs = sentence_pairs(50, length, seed=7)
    assert all(content_words(source) == length for source, _ in pairs)
    assert pairs == sentence_pairs(50, length, seed=7)
    assert pairs != sentence_pairs(50, length, seed=8)


def test_particles_follow_the_final_consonant():
    assert (subject_particle("곰"), subject_particle("고양이")) == ("이", "가")
    assert (object_particle("수박"), object_particle("사과")) == ("을", "를")


def test_the_verb_moves_from_last_to_second():
    """In every one-clause transitive sentence, the verb ends the Korean and follows the
    subject in the gloss; the object comes last whatever the Korean order."""
    seen_object_first = False
    glosses = {gloss: verb for verb, (gloss, _) in VERBS.items()}
    english = {gloss: noun for noun, gloss in NOUNS.items()}
    for source, target in sentence_pairs(400, 3, seed=1):
        words, gloss = source.split(), target.split()
        if words[-1] not in VERBS:
            continue
        subject, verb, obj = gloss
        assert glosses[verb] == words[-1]
        subject_word = english[subject] + subject_particle(english[subject])
        object_word = english[obj] + object_particle(english[obj])
        assert set(words[:2]) == {subject_word, object_word}
        seen_object_first |= words[0] == object_word
    assert seen_object_first  # the particles, not the position, say who does what


def test_longer_sentences_join_clauses():
    pairs = sentence_pairs(50, 12, seed=0)
    assert all(source.count("그리고") == target.count("and") >= 1 for source, target in pairs)


def test_batches_are_padded_and_shifted():
    task = make_task("translate")
    block = task.default_block_size
    src, tgt_in, targets = task.get_batch("train", 8, block, np.random.default_rng(0))
    assert src.shape == tgt_in.shape == targets.shape == (8, block)
    v = task.vocab
    assert (tgt_in[:, 0] == v.bos_id).all()
    for row in range(8):
        n = int((targets[row] != IGNORE).sum())
        assert targets[row, n - 1] == v.eos_id
        np.testing.assert_array_equal(tgt_in[row, 1:n], targets[row, : n - 1])
        assert (tgt_in[row, n:] == v.pad_id).all()
    with pytest.raises(ValueError, match="too short"):
        task.get_batch("train", 2, block - 1, np.random.default_rng(0))


def test_validation_sentences_are_never_trained_on():
    task = TranslateTask()
    held_out = {source for source, _ in task.val_examples}
    train_pairs = task._draw(np.random.default_rng(0), 500, "train")
    assert not held_out & {source for source, _ in train_pairs}


def test_word_vocab_round_trip_and_unknown_words():
    vocab = TranslateTask().vocab
    assert WordVocab.from_string(vocab.to_string()).words == vocab.words
    ids = vocab.encode("apple is tasty") + [vocab.eos_id, vocab.pad_id]
    assert vocab.decode(ids) == "apple is tasty"
    with pytest.raises(UsageError, match="맛있어"):
        vocab.encode("사과는 맛있어")


class Oracle:
    """A model that writes the reference gloss, or a wrong last word for odd rows."""

    training = False

    def __init__(self, task, wrong_odd_rows=False):
        self.task, self.wrong = task, wrong_odd_rows
        self.glosses = dict(task.val_examples)

    def eval(self):
        return self

    def train(self, mode=True):
        return self

    def generate(self, src, max_new_tokens):
        v = self.task.vocab
        rows = []
        for i, row in enumerate(src.numpy()):
            gloss = v.encode(self.glosses[" ".join(v.words[j] for j in row if j != v.pad_id)])
            if self.wrong and i % 2:
                gloss[-1] = v.stoi["apple" if v.words[gloss[-1]] != "apple" else "cat"]
            rows.append(gloss + [v.eos_id] + [v.pad_id] * (max_new_tokens - len(gloss) - 1))
        return mg.tensor(np.array(rows))


def test_evaluate_scores_exact_match_and_tokens():
    task = TranslateTask()
    assert task.evaluate(Oracle(task)) == {"exact_match": 1.0, "token_acc": 1.0}
    metrics = task.evaluate(Oracle(task, wrong_odd_rows=True))
    assert metrics["exact_match"] == pytest.approx(0.5)
    assert 0.8 < metrics["token_acc"] < 0.95


def test_models_must_fit_the_task():
    with pytest.raises(UsageError, match="needs an encoder-decoder"):
        train(config_for_task("translate", model="gpt", steps=1))
    with pytest.raises(UsageError, match="encoder-decoder for --task translate"):
        train(config_for_task("copy", model="lstm", steps=1))
    with pytest.raises(UsageError, match="--no-residual is for --model gpt"):
        train(config_for_task("translate", residual=False, steps=1))


@pytest.mark.parametrize("model", ["seq2seq", "lstm-attn"])
def test_train_resume_and_sample_translate(tmp_path, capsys, model):
    run = tmp_path / "run"
    small = ["--d-model", "16", "--layers", "1", "--batch-size", "8", "--eval-every", "3"]
    args = ["train", "--task", "translate", "--model", model, *small, "--out", str(run)]
    assert main([*args, "--steps", "3"]) == 0
    first = capsys.readouterr().out
    assert "trained 3 steps" in first and " -> " in first  # "source -> translation"
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    assert config["train"]["model"] == model
    assert main(["train", "--resume", str(run), "--steps", "6"]) == 0
    assert "trained 3 steps" in capsys.readouterr().out
    assert main(["sample", "--run", str(run), "--prompt", "사과는 맛있다"]) == 0
    words = capsys.readouterr().out.split()
    assert all(word in TranslateTask().vocab.stoi for word in words)
    assert main(["sample", "--run", str(run), "--prompt", "사과는 맛있어"]) == 2
    assert "맛있어" in capsys.readouterr().err
    for command in ("graph", "explore"):  # GPT runs only: one line, exit 2
        assert main([command, "--run", str(run), "--out", str(tmp_path / "g.svg")]) == 2
        assert "encoder-decoder" in capsys.readouterr().err
