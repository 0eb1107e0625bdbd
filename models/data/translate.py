"""``translate``: Korean sentences of the grammar corpus into an English-like gloss.

Korean puts the verb last (subject-object-verb) and marks each noun's role with a particle;
the gloss puts the verb second (subject-verb-object) and has no particles:

    사과는 맛있다                         apple is tasty
    작은 고양이가 빨간 사과를 먹는다        small cat eats red apple
    사과를 고양이가 먹는다                 cat eats apple          (object first: the
                                                                   particles say who eats)
    하늘은 맑다 그리고 토끼가 꽃을 본다     sky is clear and rabbit sees flower

So the decoder must look back at source words out of order: to write the verb it reads
the last word of its clause, then returns to the object before it. The particles follow
the final-consonant rule of the grammar task: 은/는, 이/가, 을/를.

Tokens are words (a noun with its particle is one word); ``length`` counts a sentence's
content words, every source word but the connective 그리고, and is the task's knob.
"""

from __future__ import annotations

import zlib

import numpy as np

from models.data.grammar import CLASSES, has_final_consonant, topic_particle
from models.data.task import IGNORE, Task, check_split
from models.errors import UsageError

PAD, BOS, EOS = "<pad>", "<s>", "</s>"
AND = ("그리고", "and")

# Korean noun -> its gloss, for every noun of the grammar corpus
NOUNS = {
    "사과": "apple", "수박": "watermelon", "떡볶이": "tteokbokki", "김치": "kimchi",
    "라면": "ramen", "비빔밥": "bibimbap", "포도": "grape", "딸기": "strawberry",
    "냉면": "naengmyeon", "불고기": "bulgogi",
    "수익률": "yield", "금리": "rate", "주가": "stock", "배당": "dividend", "연봉": "salary",
    "점수": "score", "환율": "exchange", "성적": "grade",
    "스킬샷": "skillshot", "헤드샷": "headshot", "궁극기": "ultimate", "화살": "arrow",
    "저격": "snipe", "투사체": "projectile", "평타": "attack",
    "하늘": "sky", "날씨": "weather", "공기": "air", "바다": "sea", "호수": "lake",
    "물": "water", "아침": "morning", "시냇물": "stream",
    "고양이": "cat", "강아지": "puppy", "토끼": "rabbit", "펭귄": "penguin", "곰": "bear",
    "수달": "otter", "햄스터": "hamster", "거북": "turtle", "다람쥐": "squirrel",
    "꽃": "flower", "장미": "rose", "노을": "sunset", "무지개": "rainbow", "별": "star",
    "단풍": "maple", "벚꽃": "blossom", "목소리": "voice",
}  # fmt: skip

# predicate -> its gloss; "잘 맞췄다" is two words, glossed "hit well" (the adverb moves too)
PREDICATES = {
    "맛있다": ("is", "tasty"), "좋다": ("is", "good"), "높다": ("is", "high"),
    "잘 맞췄다": ("hit", "well"), "맑다": ("is", "clear"), "귀엽다": ("is", "cute"),
    "아름답다": ("is", "beautiful"), "예쁘다": ("is", "pretty"),
}  # fmt: skip

ADJECTIVES = {
    "작은": "small", "큰": "big", "빨간": "red", "하얀": "white", "검은": "black",
    "예쁜": "pretty", "귀여운": "cute", "새로운": "new",
}  # fmt: skip

# transitive verb -> (gloss, the meaning classes of the objects it takes); subjects: animals
VERBS = {
    "먹는다": ("eats", ("food",)),
    "좋아한다": ("likes", ("food", "animal", "sight", "sky")),
    "본다": ("sees", ("animal", "sight", "sky")),
}

VAL_EXAMPLES = 300
VAL_SEED = 4321
SPLIT_CHANCE = 0.4  # a sentence that could hold two clauses does, this often
MAX_CLAUSE = 7  # content words in one clause: 2 adjectives, subject, 2 adjectives, object, verb


def subject_particle(noun: str) -> str:
    """이 after a final consonant, 가 after a vowel: 곰이, 고양이가."""
    return "이" if has_final_consonant(noun[-1]) else "가"


def object_particle(noun: str) -> str:
    """을 after a final consonant, 를 after a vowel: 수박을, 사과를."""
    return "을" if has_final_consonant(noun[-1]) else "를"


def _nouns_of(*classes: str) -> list[str]:
    return [noun for name in classes for noun in CLASSES[name][0]]


def _adjectives(rng, count: int) -> tuple[list[str], list[str]]:
    """``count`` distinct adjectives and their glosses."""
    chosen = rng.choice(list(ADJECTIVES), size=count, replace=False).tolist()
    return chosen, [ADJECTIVES[a] for a in chosen]


def descriptive_clause(rng, words: int) -> tuple[list[str], list[str]]:
    """[adjective] noun-은/는 predicate: "사과는 맛있다" -> "apple is tasty" (2 or 3 words)."""
    name = list(CLASSES)[rng.integers(len(CLASSES))]
    nouns, predicates = CLASSES[name]
    noun = nouns[rng.integers(len(nouns))]
    predicate = predicates[rng.integers(len(predicates))]
    two_word = len(predicate.split()) == 2
    if words < 2 + two_word:  # "잘 맞췄다" needs one word more
        return descriptive_clause(rng, words)
    adjectives, glosses = _adjectives(rng, words - 2 - two_word)
    source = adjectives + [noun + topic_particle(noun)] + predicate.split()
    return source, glosses + [NOUNS[noun], *PREDICATES[predicate]]


def transitive_clause(rng, words: int) -> tuple[list[str], list[str]]:
    """[adj] subject-이/가 [adj] object-을/를 verb -> [adj] subject verb [adj] object;
    one clause in three puts the object first (the particles still say who does what)."""
    verb = list(VERBS)[rng.integers(len(VERBS))]
    gloss, object_classes = VERBS[verb]
    subjects, objects = _nouns_of("animal"), _nouns_of(*object_classes)
    subject = subjects[rng.integers(len(subjects))]
    obj = objects[rng.integers(len(objects))]
    while obj == subject:
        obj = objects[rng.integers(len(objects))]
    # the adjectives beyond subject, object and verb: at most two on each noun
    extra = words - 3
    on_subject = int(rng.integers(max(0, extra - 2), min(extra, 2) + 1))
    subject_adj, subject_gloss = _adjectives(rng, on_subject)
    object_adj, object_gloss = _adjectives(rng, extra - on_subject)
    subject_words = subject_adj + [subject + subject_particle(subject)]
    object_words = object_adj + [obj + object_particle(obj)]
    first, second = subject_words, object_words
    if rng.random() < 1 / 3:
        first, second = object_words, subject_words
    source = first + second + [verb]
    target = subject_gloss + [NOUNS[subject], gloss] + object_gloss + [NOUNS[obj]]
    return source, target


def clause_sizes(rng, length: int) -> list[int]:
    """``length`` content words cut into clauses of 2 to MAX_CLAUSE words: longer sentences
    always, sentences of 4 words or more sometimes, join several clauses."""
    sizes, left = [], length
    while left > MAX_CLAUSE or (left >= 4 and rng.random() < SPLIT_CHANCE):
        size = int(rng.integers(2, min(MAX_CLAUSE, left - 2) + 1))
        sizes.append(size)
        left -= size
    return sizes + [left]


def sentence_pair(rng: np.random.Generator, length: int) -> tuple[str, str]:
    """One (Korean sentence, gloss) with exactly ``length`` content words (at least 2)."""
    if length < 2:
        raise ValueError(f"translate: a sentence has at least 2 content words, got {length}")
    source, target = [], []
    for i, size in enumerate(clause_sizes(rng, length)):
        if i:
            source.append(AND[0])
            target.append(AND[1])
        transitive = size >= 5 or (size >= 3 and rng.random() < 0.6)
        words, gloss = (transitive_clause if transitive else descriptive_clause)(rng, size)
        source += words
        target += gloss
    return " ".join(source), " ".join(target)


def sentence_pairs(count: int, length: int, seed: int) -> list[tuple[str, str]]:
    """``count`` (Korean sentence, gloss) pairs of ``length`` content words each, drawn from
    ``seed``: the same pairs on every call."""
    rng = np.random.default_rng(seed)
    return [sentence_pair(rng, length) for _ in range(count)]


def content_words(source: str) -> int:
    """The length of a Korean sentence: its words but the connective 그리고."""
    return sum(word != AND[0] for word in source.split())


def is_held_out(source: str) -> bool:
    """About one sentence in ten belongs to validation, the same ones on every run."""
    return zlib.crc32(source.encode()) % 10 == 0


class WordVocab:
    """Words to token ids and back; ids 0, 1, 2 are <pad>, <s> (begin) and </s> (end)."""

    def __init__(self, words):
        rest = sorted(set(words) - {PAD, BOS, EOS})
        self.words = [PAD, BOS, EOS, *rest]
        self.stoi = {word: i for i, word in enumerate(self.words)}
        self.pad_id, self.bos_id, self.eos_id = 0, 1, 2

    def __len__(self) -> int:
        return len(self.words)

    def __repr__(self) -> str:
        return f"WordVocab({len(self)} words)"

    def encode(self, text: str) -> list[int]:
        unknown = [word for word in text.split() if word not in self.stoi]
        if unknown:
            raise UsageError(
                f"words the model never saw: {' '.join(dict.fromkeys(unknown))} (it knows "
                f"{len(self)} words: the nouns, particles and predicates of the grammar task)"
            )
        return [self.stoi[word] for word in text.split()]

    def decode(self, ids) -> str:
        """The words of ``ids`` up to the first </s>, padding left out."""
        words = []
        for i in ids:
            word = self.words[int(i)]
            if word == EOS:
                break
            if word not in (PAD, BOS):
                words.append(word)
        return " ".join(words)

    def to_string(self) -> str:
        """The vocabulary as one string (words separated by spaces), for a run's config."""
        return " ".join(self.words)

    @classmethod
    def from_string(cls, text: str) -> WordVocab:
        return cls(text.split(" "))


def every_word() -> list[str]:
    """Every word a sentence of the task can hold, on either side."""
    nouns = list(NOUNS)
    words = [noun + topic_particle(noun) for noun in nouns]
    words += [noun + subject_particle(noun) for noun in nouns]
    words += [noun + object_particle(noun) for noun in nouns]
    words += [w for predicate in PREDICATES for w in predicate.split()]
    words += list(ADJECTIVES) + list(VERBS) + [AND[0]]
    glosses = list(NOUNS.values()) + list(ADJECTIVES.values()) + [AND[1]]
    glosses += [w for pair in PREDICATES.values() for w in pair]
    glosses += [gloss for gloss, _ in VERBS.values()]
    return words + glosses


class TranslateTask(Task):
    """Sentences of ``min_length`` to ``max_length`` content words. A batch is three (B, T)
    arrays: the source (padded), the decoder's input (<s> + gloss) and its targets (gloss +
    </s>, IGNORE on padding). Scored by exact match and token accuracy of greedy
    translations of held-out sentences."""

    name = "translate"
    seq2seq = True  # batches and evaluation of an encoder-decoder
    sample_temperature = 0.0

    def __init__(self, min_length: int = 2, max_length: int = 6):
        if not 2 <= min_length <= max_length:
            raise ValueError(
                f"translate: lengths must satisfy 2 <= min_length <= max_length, got "
                f"{min_length} and {max_length}"
            )
        self.min_length, self.max_length = min_length, max_length
        self.vocab = WordVocab(every_word())
        self.default_block_size = self.min_block_size()
        self.sample_tokens = self.min_block_size()
        self.val_examples = self._draw(np.random.default_rng(VAL_SEED), VAL_EXAMPLES, "val")

    def min_block_size(self) -> int:
        """The longest source or target, in tokens: each clause (>= 2 words) can add a
        connective, and its gloss an "is", then the target's </s>."""
        clauses = self.max_length // 2
        return self.max_length + 2 * clauses + 1

    def _draw(self, rng, count: int, split: str) -> list[tuple[str, str]]:
        want_held_out = split == "val"
        pairs = []
        while len(pairs) < count:
            length = int(rng.integers(self.min_length, self.max_length + 1))
            source, target = sentence_pair(rng, length)
            if is_held_out(source) == want_held_out:
                pairs.append((source, target))
        return pairs

    def encode_pairs(self, pairs, block_size: int) -> tuple[np.ndarray, ...]:
        """(src, tgt_in, tgt_out), each (len(pairs), block_size) int64."""
        count = len(pairs)
        src = np.full((count, block_size), self.vocab.pad_id, dtype=np.int64)
        tgt_in = np.full((count, block_size), self.vocab.pad_id, dtype=np.int64)
        tgt_out = np.full((count, block_size), IGNORE, dtype=np.int64)
        for row, (source, target) in enumerate(pairs):
            words = self.vocab.encode(source)
            gloss = self.vocab.encode(target)
            src[row, : len(words)] = words
            tgt_in[row, : len(gloss) + 1] = [self.vocab.bos_id, *gloss]
            tgt_out[row, : len(gloss) + 1] = [*gloss, self.vocab.eos_id]
        return src, tgt_in, tgt_out

    def get_batch(
        self, split: str, batch_size: int, block_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        check_split(split)
        if block_size < self.min_block_size():
            raise ValueError(
                f"translate: block_size {block_size} is too short; sentences need "
                f"{self.min_block_size()}"
            )
        return self.encode_pairs(self._draw(rng, batch_size, split), block_size)

    def translate(self, model, sentences: list[str], device: str = "cpu") -> list[str]:
        """Greedy translations of ``sentences`` by ``model``."""
        import minigrad as mg

        was_training = model.training
        model.eval()
        try:
            width = max(len(s.split()) for s in sentences)
            src = np.full((len(sentences), width), self.vocab.pad_id, dtype=np.int64)
            for row, sentence in enumerate(sentences):
                ids = self.vocab.encode(sentence)
                src[row, : len(ids)] = ids
            with mg.no_grad():
                out = model.generate(mg.tensor(src, device=device), self.min_block_size())
        finally:
            model.train(was_training)
        return [self.vocab.decode(row) for row in out.numpy()]

    def evaluate(self, model, device: str = "cpu") -> dict[str, float]:
        """Exact match (the whole gloss right) and token accuracy (the share of the
        reference's tokens, </s> included, predicted at their position) on held-out
        sentences, decoded greedily."""
        sources = [source for source, _ in self.val_examples]
        translations = self.translate(model, sources, device)
        exact, right, total = 0, 0, 0
        for got, (_, want) in zip(translations, self.val_examples):
            exact += got == want
            reference, predicted = want.split() + [EOS], got.split() + [EOS]
            right += sum(a == b for a, b in zip(reference, predicted))
            total += len(reference)
        return {"exact_match": exact / len(translations), "token_acc": right / total}

    def samples(self, model, device: str = "cpu") -> list[str]:
        """A few held-out sentences and their translations, "source -> translation"."""
        sources = self.sample_prompts()
        translations = self.translate(model, sources, device)
        return [f"{s} -> {t}" for s, t in zip(sources, translations)]

    def sample_prompts(self) -> list[str]:
        return [source for source, _ in self.val_examples[:4]]
