"""Toy transformers built from ``minigrad.nn``."""

from models.gpt import GPT, GPTConfig, next_token_loss

__all__ = ["GPT", "GPTConfig", "next_token_loss"]
