"""Sequence tasks on digit strings, one example per row: a prompt, then the answer and "\\n".

    copy     3142>3142          reverse  3142>2413
    sort     3142>1234          add      12+345=357

The loss is taken on the answer (and its closing "\\n") only: the prompt is given, not
predicted. Which problems are held out for validation is fixed by a hash of the prompt,
so a model is scored on problems it never trained on.
"""

from __future__ import annotations

import zlib

import numpy as np

from models.data.task import IGNORE, Task, check_split, complete
from models.data.vocab import CharVocab

END = "\n"
VAL_SEED = 1234
VAL_EXAMPLES = 500


def is_held_out(prompt: str) -> bool:
    """About one problem in ten belongs to validation, the same ones on every run."""
    return zlib.crc32(prompt.encode()) % 10 == 0


class SequenceTask(Task):
    """Base of the digit tasks; a subclass says how to draw a problem and what its answer is."""

    separators = ">"
    sample_temperature = 0.0

    def __init__(self, min_digits: int = 1, max_digits: int = 6):
        self.min_digits, self.max_digits = min_digits, max_digits
        self.vocab = CharVocab("0123456789" + self.separators + END)
        self.pad_id = self.vocab.stoi[END]
        self.val_examples = self._draw(np.random.default_rng(VAL_SEED), VAL_EXAMPLES, "val")
        self.default_block_size = self.min_block_size()
        self.sample_tokens = self.longest_answer() + len(END)

    def make_example(self, rng: np.random.Generator) -> tuple[str, str]:
        """One (prompt, answer) pair."""
        raise NotImplementedError

    def longest_answer(self) -> int:
        return self.max_digits

    def longest_prompt(self) -> int:
        return self.max_digits + 1

    def min_block_size(self) -> int:
        # x is the example without its last character: prompt + answer + END, minus one
        return self.longest_prompt() + self.longest_answer()

    def _draw(self, rng: np.random.Generator, count: int, split: str) -> list[tuple[str, str]]:
        """``count`` problems of ``split``, drawn until enough fall on that side of the hash."""
        want_held_out = split == "val"
        examples = []
        while len(examples) < count:
            prompt, answer = self.make_example(rng)
            if is_held_out(prompt) == want_held_out:
                examples.append((prompt, answer))
        return examples

    def get_batch(
        self, split: str, batch_size: int, block_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        check_split(split)
        if block_size < self.min_block_size():
            raise ValueError(
                f"{self.name}: block_size {block_size} is too short; examples need "
                f"{self.min_block_size()}"
            )
        x = np.full((batch_size, block_size), self.pad_id, dtype=np.int64)
        y = np.full((batch_size, block_size), IGNORE, dtype=np.int64)
        for row, (prompt, answer) in enumerate(self._draw(rng, batch_size, split)):
            tokens = self.vocab.encode(prompt + answer + END)
            # y[j] is the token after x[j]; the answer starts at y[len(prompt) - 1]
            x[row, : len(tokens) - 1] = tokens[:-1]
            y[row, len(prompt) - 1 : len(tokens) - 1] = tokens[len(prompt) :]
        return x, y

    def evaluate(self, model, device: str = "cpu") -> dict[str, float]:
        """Exact match of greedy completions on the held-out problems."""
        prompts = [prompt for prompt, _ in self.val_examples]
        completions = complete(
            model,
            self.vocab,
            prompts,
            max_new_tokens=self.longest_answer() + len(END),
            device=device,
            temperature=0.0,  # greedy
        )
        right = [got == answer for got, (_, answer) in zip(completions, self.val_examples)]
        return {"exact_match": float(np.mean(right))}

    def sample_prompts(self) -> list[str]:
        return [prompt for prompt, _ in self.val_examples[:4]]

    def _digits(self, rng: np.random.Generator) -> str:
        length = rng.integers(self.min_digits, self.max_digits + 1)
        return "".join(str(d) for d in rng.integers(0, 10, size=length))


class CopyTask(SequenceTask):
    name = "copy"

    def make_example(self, rng: np.random.Generator) -> tuple[str, str]:
        digits = self._digits(rng)
        return digits + ">", digits


class ReverseTask(SequenceTask):
    name = "reverse"

    def make_example(self, rng: np.random.Generator) -> tuple[str, str]:
        digits = self._digits(rng)
        return digits + ">", digits[::-1]


class SortTask(SequenceTask):
    name = "sort"

    def make_example(self, rng: np.random.Generator) -> tuple[str, str]:
        digits = self._digits(rng)
        return digits + ">", "".join(sorted(digits))


class AddTask(SequenceTask):
    """a + b with 1 to ``max_digits`` digits each, the sum written as usual."""

    name = "add"
    separators = "+="

    def __init__(self, min_digits: int = 1, max_digits: int = 3):
        super().__init__(min_digits, max_digits)

    def longest_prompt(self) -> int:
        return 2 * self.max_digits + 2

    def longest_answer(self) -> int:
        return self.max_digits + 1

    def _number(self, rng: np.random.Generator) -> int:
        length = int(rng.integers(self.min_digits, self.max_digits + 1))
        low = 0 if length == 1 else 10 ** (length - 1)
        return int(rng.integers(low, 10**length))

    def make_example(self, rng: np.random.Generator) -> tuple[str, str]:
        a, b = self._number(rng), self._number(rng)
        return f"{a}+{b}=", str(a + b)
