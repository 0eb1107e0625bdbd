"""``minigrad.optim``: optimizers that update parameters from their gradients, and learning-rate
schedules (``optim.lr_scheduler``). Gradient clipping is ``nn.utils.clip_grad_norm_``."""

from minigrad.optim import lr_scheduler
from minigrad.optim.adam import Adam, AdamW
from minigrad.optim.optimizer import Optimizer
from minigrad.optim.sgd import SGD

__all__ = ["Adam", "AdamW", "Optimizer", "SGD", "lr_scheduler"]
