"""The built-in tasks: the Korean particle rule, predicates that fit their nouns, targets that
are right, a fixed train/val split, and evaluations that score an oracle model perfectly."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest

from models.data import IGNORE, TASKS, GrammarTask, make_task
from models.data.grammar import (
    CLASSES,
    allowed_predicates,
    has_final_consonant,
    make_corpus,
    noun_classes,
    score_completion,
    topic_particle,
)
from models.data.sequences import is_held_out
from models.data.text import TextTask
from models.errors import UsageError

SEQUENCE_TASKS = ["copy", "reverse", "sort", "add"]


def solve(prompt: str) -> str:
    """The right answer to a sequence-task prompt, computed independently of the tasks."""
    if prompt.endswith("="):
        a, b = prompt[:-1].split("+")
        return str(int(a) + int(b))
    raise AssertionError(f"not an add prompt: {prompt!r}")


ANSWER = {
    "copy": lambda digits: digits,
    "reverse": lambda digits: digits[::-1],
    "sort": lambda digits: "".join(sorted(digits)),
}


def expected_answer(task: str, prompt: str) -> str:
    if task == "add":
        return solve(prompt)
    assert prompt.endswith(">")
    return ANSWER[task](prompt[:-1])


# -- grammar: the particle rule ---------------------------------------------------------------


def final_consonant_by_jamo(syllable: str) -> bool:
    """Independent oracle: Unicode decomposes a syllable into 2 jamo (no final) or 3."""
    return len(unicodedata.normalize("NFD", syllable)) == 3


@pytest.mark.parametrize("noun", sorted(noun_classes()))
def test_particle_follows_the_final_consonant_of_every_noun(noun):
    expected = "은" if final_consonant_by_jamo(noun[-1]) else "는"
    assert topic_particle(noun) == expected


@pytest.mark.parametrize(
    "syllable, has_final", [("과", False), ("박", True), ("이", False), ("샷", True), ("률", True)]
)
def test_has_final_consonant_examples(syllable, has_final):
    assert has_final_consonant(syllable) is has_final


def test_has_final_consonant_refuses_non_hangul():
    with pytest.raises(ValueError, match="Hangul"):
        has_final_consonant("a")


def test_the_classic_examples():
    assert topic_particle("사과") + " " + allowed_predicates("사과")[0] == "는 맛있다"
    assert topic_particle("수박") == "은"
    assert "잘 맞췄다" in allowed_predicates("스킬샷")
    assert set(allowed_predicates("수익률")) == {"좋다", "높다"}


def test_both_particles_are_well_represented():
    particles = [topic_particle(noun) for noun in noun_classes()]
    assert 0.3 < particles.count("은") / len(particles) < 0.7


def test_classes_are_several_and_disjoint():
    assert len(CLASSES) >= 5
    all_nouns = [noun for nouns, _ in CLASSES.values() for noun in nouns]
    assert len(all_nouns) == len(set(all_nouns)) >= 30
    all_predicates = [p for _, predicates in CLASSES.values() for p in predicates]
    assert len(all_predicates) == len(set(all_predicates)), "a predicate fits one class only"
    for nouns, predicates in CLASSES.values():
        assert 6 <= len(nouns) <= 10
        assert 1 <= len(predicates) <= 2


def test_every_corpus_sentence_is_grammatical():
    lines = make_corpus(2000, seed=7).strip("\n").split("\n")
    assert len(lines) == 2000
    seen_nouns = set()
    for line in lines:
        subject, predicate = line.split(" ", 1)
        noun, particle = subject[:-1], subject[-1]
        assert particle == topic_particle(noun), line
        assert predicate in allowed_predicates(noun), line
        seen_nouns.add(noun)
    assert seen_nouns == set(noun_classes())


@pytest.mark.parametrize(
    "completion, expected",
    [("는 맛있다", (True, True)), ("은 맛있다", (False, True)), ("는 귀엽다", (True, False)),
     ("", (False, False)), ("는 맛있다다", (True, False)), ("는맛있다", (True, False))],
)  # fmt: skip
def test_score_completion_of_apple(completion, expected):
    assert score_completion("사과", completion) == expected


# -- corpus batches ----------------------------------------------------------------------------


def test_corpus_targets_are_the_next_characters():
    task = GrammarTask()
    x, y = task.get_batch("train", 8, 24, np.random.default_rng(0))
    assert x.shape == y.shape == (8, 24) and x.dtype == y.dtype == np.int64
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
    for row_x, row_y in zip(x, y):
        window = task.vocab.decode(row_x) + task.vocab.decode(row_y[-1:])
        assert window in task.text[: int(len(task.text) * 0.9) + 1]


def test_same_rng_same_batch_and_splits_differ():
    task = GrammarTask()
    a = task.get_batch("train", 4, 16, np.random.default_rng([3, 9]))
    b = task.get_batch("train", 4, 16, np.random.default_rng([3, 9]))
    np.testing.assert_array_equal(a[0], b[0])
    assert len(task.splits["val"]) == len(task.text) - int(len(task.text) * 0.9)


def test_get_batch_refuses_an_unknown_split():
    with pytest.raises(ValueError, match="split"):
        make_task("copy").get_batch("test", 2, 13, np.random.default_rng(0))


# -- sequence tasks ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", SEQUENCE_TASKS)
@pytest.mark.parametrize("split", ["train", "val"])
def test_sequence_targets_are_the_answer_only(name, split):
    task = make_task(name)
    block = task.min_block_size() + 3  # room to spare: padding must be ignored too
    x, y = task.get_batch(split, 32, block, np.random.default_rng(1))
    for row_x, row_y in zip(x, y):
        text = task.vocab.decode(row_x)
        prompt = text[: text.index(">" if name != "add" else "=") + 1]
        answer = expected_answer(name, prompt)
        counted = row_y != IGNORE
        # the loss is taken on answer + "\n", right after the prompt, nowhere else
        assert task.vocab.decode(row_y[counted]) == answer + "\n"
        assert np.flatnonzero(counted)[0] == len(prompt) - 1
        assert counted.sum() == len(answer) + 1
        assert is_held_out(prompt) == (split == "val")


@pytest.mark.parametrize("name", SEQUENCE_TASKS)
def test_validation_problems_are_held_out_of_training(name):
    task = make_task(name)
    val_prompts = {prompt for prompt, _ in task.val_examples}
    assert all(is_held_out(p) for p in val_prompts)
    for prompt, answer in task.val_examples:
        assert answer == expected_answer(name, prompt)
    x, _ = task.get_batch("train", 256, task.min_block_size(), np.random.default_rng(5))
    for row in x:
        text = task.vocab.decode(row)
        assert text[: text.index(">" if name != "add" else "=") + 1] not in val_prompts


def test_sequence_task_refuses_a_short_block():
    task = make_task("reverse")
    with pytest.raises(ValueError, match="too short"):
        task.get_batch("train", 2, task.min_block_size() - 1, np.random.default_rng(0))


# -- evaluation against oracle models ------------------------------------------------------------


class OracleModel:
    """A stand-in for GPT whose ``generate`` writes ``answer(prompt)`` and then newlines."""

    def __init__(self, vocab, answer):
        self.vocab, self.answer, self.training = vocab, answer, True
        self.calls = []

    def train(self, mode: bool = True):
        self.training = mode
        return self

    def eval(self):
        return self.train(False)

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        import minigrad as mg

        self.calls.append((idx.shape, max_new_tokens, temperature, self.training))
        rows = []
        for ids in idx.numpy():
            prompt = self.vocab.decode(ids)
            text = (self.answer(prompt) + "\n" * max_new_tokens)[:max_new_tokens]
            rows.append(list(ids) + self.vocab.encode(text))
        return mg.tensor(np.array(rows, dtype=np.int64))


@pytest.mark.parametrize("name", SEQUENCE_TASKS)
def test_exact_match_of_an_oracle_is_one(name):
    task = make_task(name)
    oracle = OracleModel(task.vocab, lambda prompt: expected_answer(name, prompt))
    assert task.evaluate(oracle) == {"exact_match": 1.0}
    assert oracle.training, "evaluate puts the model back in training mode"
    assert all(not training for *_, training in oracle.calls), "generation runs in eval mode"


@pytest.mark.parametrize("name", ["reverse", "sort", "add"])
def test_exact_match_of_a_copying_model_is_low(name):
    task = make_task(name)
    copier = OracleModel(task.vocab, lambda prompt: prompt[:-1].replace("+", ""))
    assert task.evaluate(copier)["exact_match"] < 0.3


def test_exact_match_counts_a_missing_end_as_wrong():
    task = make_task("copy")
    rambler = OracleModel(task.vocab, lambda prompt: prompt[:-1] + "0" * 20)
    assert task.evaluate(rambler)["exact_match"] == 0.0


def test_grammar_evaluation_of_oracles():
    task = GrammarTask(samples_per_noun=2)

    def perfect(prompt):
        noun = prompt.strip("\n")
        return topic_particle(noun) + " " + allowed_predicates(noun)[-1]

    def wrong_particle(prompt):
        noun = prompt.strip("\n")
        return ("는" if topic_particle(noun) == "은" else "은") + " " + allowed_predicates(noun)[0]

    def all_tasty(prompt):
        return topic_particle(prompt.strip("\n")) + " 맛있다"

    assert task.evaluate(OracleModel(task.vocab, perfect)) == {
        "particle_acc": 1.0,
        "predicate_acc": 1.0,
    }
    assert task.evaluate(OracleModel(task.vocab, wrong_particle)) == {
        "particle_acc": 0.0,
        "predicate_acc": 1.0,
    }
    foods = len(CLASSES["food"][0]) / len(noun_classes())
    scores = task.evaluate(OracleModel(task.vocab, all_tasty))
    assert scores["particle_acc"] == 1.0
    assert scores["predicate_acc"] == pytest.approx(foods)


# -- text files and task lookup ------------------------------------------------------------------


def test_text_task_reads_utf8_and_splits_90_10(tmp_path):
    path = tmp_path / "poem.txt"
    text = "하늘을 우러러\n한 점 부끄럼이 없기를\n" * 20
    path.write_text(text, encoding="utf-8")
    task = make_task("text", str(path))
    assert isinstance(task, TextTask)
    assert task.vocab.decode(np.concatenate(list(task.splits.values()))) == text
    assert len(task.splits["train"]) == int(len(text) * 0.9)
    x, y = task.get_batch("val", 3, 8, np.random.default_rng(0))
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])


@pytest.mark.parametrize(
    "content, message",
    [(None, "no such file"), (b"\xff\xfe caf\xe9", "not UTF-8"), (b"", "empty")],
    ids=["missing", "latin1", "empty"],
)
def test_text_task_refuses_bad_files(tmp_path, content, message):
    path = tmp_path / "data.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(UsageError, match=message):
        make_task("text", str(path))


def test_text_shorter_than_the_context_is_refused(tmp_path):
    path = tmp_path / "short.txt"
    path.write_text("abcdefghij" * 10, encoding="utf-8")  # val part: 10 characters
    task = make_task("text", str(path))
    task.check_block_size(9)
    with pytest.raises(UsageError, match="too short"):
        task.check_block_size(10)


@pytest.mark.parametrize(
    "name, data, message",
    [("nope", None, "unknown task"), ("text", None, "needs --data"), ("copy", "x", "only for")],
)
def test_make_task_refuses(name, data, message):
    with pytest.raises(UsageError, match=message):
        make_task(name, data)


def test_every_task_is_registered():
    assert set(TASKS) == {"grammar", "copy", "reverse", "sort", "add", "translate", "text"}
