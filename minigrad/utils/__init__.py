"""``minigrad.utils``: helpers beside the framework, as ``torch.utils``; so far ``data``
(datasets, samplers and the DataLoader)."""

from minigrad.utils import data

__all__ = ["data"]
