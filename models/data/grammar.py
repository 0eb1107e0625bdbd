"""``grammar``: short Korean sentences like "사과는 맛있다" (noun + topic particle + predicate).

Two things in each sentence depend on the noun, and a model gets both right only by looking
back at it, which is what attention is for:

- the topic particle is 은 after a syllable with a final consonant (받침) and 는 after one
  without: 수박은, 사과는. A precomposed Hangul syllable is
      code = 0xAC00 + (initial * 21 + vowel) * 28 + final,    final = 0 for none,
  so its final consonant is (code - 0xAC00) % 28, and the rule is computed, never listed;
- the predicate must fit what the noun means: foods are 맛있다, a return rate is 좋다 or
  높다, a skill shot is 잘 맞췄다, ...

The corpus is a fixed stream of sentences, one per line, generated from a fixed seed.
"""

from __future__ import annotations

import numpy as np

from models.data.corpus import CorpusTask
from models.data.task import complete
from models.data.vocab import CharVocab

HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3
FINALS_PER_SYLLABLE = 28

# meaning class -> (nouns, the predicates that fit them)
CLASSES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "food": (
        ("사과", "수박", "떡볶이", "김치", "라면", "비빔밥", "포도", "딸기", "냉면", "불고기"),
        ("맛있다",),
    ),
    "figure": (
        ("수익률", "금리", "주가", "배당", "연봉", "점수", "환율", "성적"),
        ("좋다", "높다"),
    ),
    "shot": (
        ("스킬샷", "헤드샷", "궁극기", "화살", "저격", "투사체", "평타"),
        ("잘 맞췄다",),
    ),
    "sky": (
        ("하늘", "날씨", "공기", "바다", "호수", "물", "아침", "시냇물"),
        ("맑다",),
    ),
    "animal": (
        ("고양이", "강아지", "토끼", "펭귄", "곰", "수달", "햄스터", "거북", "다람쥐"),
        ("귀엽다",),
    ),
    "sight": (
        ("꽃", "장미", "노을", "무지개", "별", "단풍", "벚꽃", "목소리"),
        ("아름답다", "예쁘다"),
    ),
}

CORPUS_SEED = 20240501
CORPUS_SENTENCES = 20_000


def has_final_consonant(syllable: str) -> bool:
    """True when a Hangul syllable ends in a final consonant (받침): 박 yes, 과 no."""
    code = ord(syllable)
    if not HANGUL_FIRST <= code <= HANGUL_LAST:
        raise ValueError(f"has_final_consonant: {syllable!r} is not a precomposed Hangul syllable")
    return (code - HANGUL_FIRST) % FINALS_PER_SYLLABLE != 0


def topic_particle(noun: str) -> str:
    """은 after a final consonant, 는 after a vowel: 수박은, 사과는."""
    return "은" if has_final_consonant(noun[-1]) else "는"


def noun_classes() -> dict[str, str]:
    """Every noun and its meaning class."""
    return {noun: name for name, (nouns, _) in CLASSES.items() for noun in nouns}


def allowed_predicates(noun: str) -> tuple[str, ...]:
    return CLASSES[noun_classes()[noun]][1]


def sentence(noun: str, predicate: str) -> str:
    return f"{noun}{topic_particle(noun)} {predicate}"


def make_corpus(n_sentences: int = CORPUS_SENTENCES, seed: int = CORPUS_SEED) -> str:
    """``n_sentences`` sentences, one per line, each a uniformly drawn noun and one of its
    predicates."""
    rng = np.random.default_rng(seed)
    nouns = list(noun_classes())
    lines = []
    for i in rng.integers(0, len(nouns), size=n_sentences):
        predicates = allowed_predicates(nouns[i])
        lines.append(sentence(nouns[i], predicates[rng.integers(len(predicates))]))
    return "\n" + "\n".join(lines) + "\n"


def score_completion(noun: str, completion: str) -> tuple[bool, bool]:
    """(particle right, predicate fits) for the text a model wrote after ``noun``."""
    particle_ok = completion[:1] == topic_particle(noun)
    predicate_ok = completion[1:2] == " " and completion[2:] in allowed_predicates(noun)
    return particle_ok, predicate_ok


class GrammarTask(CorpusTask):
    """Character-level model of the sentence stream; evaluated on every noun."""

    name = "grammar"
    default_block_size = 24
    sample_tokens = 16
    sample_temperature = 0.5

    def __init__(self, samples_per_noun: int = 4, temperature: float = 0.5):
        corpus = make_corpus()
        # the vocabulary also holds what the evaluation prompts with, whatever the corpus drew
        every_sentence = [
            sentence(noun, predicate)
            for nouns, predicates in CLASSES.values()
            for noun in nouns
            for predicate in predicates
        ]
        super().__init__(corpus, CharVocab(corpus + "\n".join(every_sentence)))
        self.samples_per_noun = samples_per_noun
        self.temperature = temperature

    def evaluate(self, model, device: str = "cpu") -> dict[str, float]:
        """Prompt with "\\n" + noun, ``samples_per_noun`` times per noun at a low temperature,
        and score the particle and the predicate of each completion."""
        nouns = [noun for noun in noun_classes() for _ in range(self.samples_per_noun)]
        longest_predicate = max(len(p) for _, predicates in CLASSES.values() for p in predicates)
        completions = complete(
            model,
            self.vocab,
            ["\n" + noun for noun in nouns],
            max_new_tokens=len("은 ") + longest_predicate + len("\n"),
            device=device,
            temperature=self.temperature,
        )
        scores = np.array([score_completion(n, c) for n, c in zip(nouns, completions)])
        return {
            "particle_acc": float(scores[:, 0].mean()),
            "predicate_acc": float(scores[:, 1].mean()),
        }

    def sample_prompts(self) -> list[str]:
        return ["\n사과", "\n수박", "\n스킬샷", "\n수익률", "\n고양이"]
