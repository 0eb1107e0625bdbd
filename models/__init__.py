"""Toy transformers built from ``minigrad.nn``."""

from models.gpt import GPT, GPTConfig

__all__ = ["GPT", "GPTConfig"]
