"""``minigrad.utils.data``, as ``torch.utils.data``: a Dataset says how many examples there are
and what example i is; a DataLoader draws their indices (in order, or shuffled by a sampler),
gathers them into batches, and stacks each batch into tensors (``default_collate``).

    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    for xb, yb in loader:
        ...
"""

from minigrad.utils.data.collate import default_collate, default_convert
from minigrad.utils.data.dataloader import DataLoader, get_worker_info
from minigrad.utils.data.dataset import (
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from minigrad.utils.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "BatchSampler", "ConcatDataset", "DataLoader", "Dataset", "IterableDataset",
    "RandomSampler", "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler",
    "TensorDataset", "WeightedRandomSampler", "default_collate", "default_convert",
    "get_worker_info", "random_split",
]  # fmt: skip
