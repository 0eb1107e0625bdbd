"""Toy transformers built from ``minigrad.nn``."""

from models.gpt import GPT, GPTConfig, next_token_loss
from models.rnn_seq2seq import RNNSeq2Seq, RNNSeq2SeqConfig
from models.seq2seq import Seq2Seq, Seq2SeqConfig

__all__ = [
    "GPT",
    "GPTConfig",
    "RNNSeq2Seq",
    "RNNSeq2SeqConfig",
    "Seq2Seq",
    "Seq2SeqConfig",
    "next_token_loss",
]
