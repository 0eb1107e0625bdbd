"""Built-in training data, generated in code (nothing is downloaded).

grammar   Korean sentences "사과는 맛있다": the particle and the predicate follow the noun
copy, reverse, sort, add   digit sequence tasks, scored by exact match
translate Korean sentences into an English-like gloss, for encoder-decoders
text      any UTF-8 file, character by character (``--data FILE``)
"""

from __future__ import annotations

from models.data.corpus import CorpusTask
from models.data.grammar import GrammarTask
from models.data.sequences import AddTask, CopyTask, ReverseTask, SequenceTask, SortTask
from models.data.task import IGNORE, Task, complete
from models.data.text import TextTask
from models.data.translate import TranslateTask, WordVocab, sentence_pairs
from models.data.vocab import CharVocab
from models.errors import UsageError

TASKS = {
    "grammar": GrammarTask,
    "copy": CopyTask,
    "reverse": ReverseTask,
    "sort": SortTask,
    "add": AddTask,
    "translate": TranslateTask,
    "text": TextTask,
}


def make_task(name: str, data: str | None = None) -> Task:
    """The task called ``name``; ``text`` reads the file ``data``, the others take none."""
    if name not in TASKS:
        raise UsageError(f"unknown task {name!r}; choose one of: {', '.join(TASKS)}")
    if name == "text":
        if data is None:
            raise UsageError("--task text needs --data FILE (a UTF-8 text file)")
        return TextTask(data)
    if data is not None:
        raise UsageError(f"--data is only for --task text, not --task {name}")
    return TASKS[name]()


__all__ = [
    "IGNORE",
    "TASKS",
    "AddTask",
    "CharVocab",
    "CopyTask",
    "CorpusTask",
    "GrammarTask",
    "ReverseTask",
    "SequenceTask",
    "SortTask",
    "Task",
    "TextTask",
    "TranslateTask",
    "WordVocab",
    "complete",
    "make_task",
    "sentence_pairs",
]
