"""Datasets, as in ``torch.utils.data``: a map-style ``Dataset`` answers ``len(dataset)`` and
``dataset[i]``; an ``IterableDataset`` is read by iterating over it."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from minigrad import rng
from minigrad.creation import randperm
from minigrad.tensor import Tensor


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__(index)`` (and ``__len__``)."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset read as a stream: subclasses define ``__iter__``."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class TensorDataset(Dataset):
    """Example i is ``(t[i] for t in tensors)``: the tensors' first dimensions line up."""

    def __init__(self, *tensors: Tensor):
        sizes = [tensor.shape[0] if tensor.ndim else None for tensor in tensors]
        if not tensors or any(size != sizes[0] for size in sizes) or sizes[0] is None:
            shapes = ", ".join(str(tensor.shape) for tensor in tensors)
            raise AssertionError(  # (PyTorch's type for this error)
                f"TensorDataset: the tensors must share their first dimension, got shapes {shapes}"
            )
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(tensor[index] for tensor in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The examples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Datasets one after another (``dataset_a + dataset_b`` makes one)."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for dataset in self.datasets:
            if isinstance(dataset, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = []
        for dataset in self.datasets:
            previous = self.cumulative_sizes[-1] if self.cumulative_sizes else 0
            self.cumulative_sizes.append(previous + len(dataset))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int):
        if index < 0:
            if -index > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


def random_split(dataset: Dataset, lengths: Sequence, generator=None) -> list[Subset]:
    """Split ``dataset`` at random into non-overlapping Subsets of the given ``lengths``
    (counts, or fractions that sum to 1, as in PyTorch: the examples left over by rounding
    down go one each to the first subsets)."""
    size = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:  # fractions
        for i, fraction in enumerate(lengths):
            if not 0 <= fraction <= 1:
                raise ValueError(f"random_split: the fraction at index {i} is not in [0, 1]")
        counts = [math.floor(size * fraction) for fraction in lengths]
        for i in range(size - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != size:
        raise ValueError(
            f"random_split: the lengths {lengths} sum to {sum(lengths)}, but the dataset holds "
            f"{size} examples"
        )
    order = randperm(size, generator=generator or rng.default_generator).tolist()
    subsets, start = [], 0
    for length in lengths:
        subsets.append(Subset(dataset, order[start : start + length]))
        start += length
    return subsets
