"""Samplers, as in ``torch.utils.data``: each yields the indices of a dataset's examples in
the order a DataLoader reads them; a ``BatchSampler`` groups them into lists, one per batch."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from minigrad import rng
from minigrad.creation import multinomial, randint, randperm, tensor


def _fresh_generator(generator):
    """``generator``, or else a new one seeded from the default generator, as PyTorch's
    samplers do (so each pass over the data is shuffled anew, and ``manual_seed`` repeats)."""
    if generator is not None:
        return generator
    return rng.Generator().manual_seed(rng.draw_seed(rng.generator("cpu")))


class Sampler:
    """The base: subclasses define ``__iter__`` over indices (and ``__len__``)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """The indices in a random order (a new one each pass); with ``replacement=True``,
    ``num_samples`` indices drawn independently. More samples than examples without
    replacement go round the data again, each round in a new order."""

    def __init__(self, data_source, replacement: bool = False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(
                f"replacement should be a boolean value, but got replacement={replacement}"
            )
        if num_samples is not None and (
            isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples <= 0
        ):
            raise ValueError(
                f"num_samples should be a positive integer value, but got num_samples={num_samples}"
            )
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        size, generator = len(self.data_source), _fresh_generator(self.generator)
        if self.replacement:
            yield from randint(size, (self.num_samples,), generator=generator).tolist()
            return
        for _ in range(self.num_samples // size):
            yield from randperm(size, generator=generator).tolist()
        yield from randperm(size, generator=generator).tolist()[: self.num_samples % size]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices``, in a random order (a new one each pass)."""

    def __init__(self, indices: Sequence[int], generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self) -> Iterator[int]:
        order = randperm(len(self.indices), generator=_fresh_generator(self.generator))
        for i in order.tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices, index i drawn with probability weights[i] / sum(weights)."""

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None):
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples <= 0:
            raise ValueError(
                f"num_samples should be a positive integer value, but got num_samples={num_samples}"
            )
        if not isinstance(replacement, bool):
            raise ValueError(
                f"replacement should be a boolean value, but got replacement={replacement}"
            )
        self.weights = tensor(weights, dtype="float64")
        if self.weights.ndim != 1:
            raise ValueError(
                f"weights should be a 1d sequence but given weights have shape {self.weights.shape}"
            )
        self.num_samples, self.replacement, self.generator = num_samples, replacement, generator

    def __iter__(self) -> Iterator[int]:
        draws = multinomial(
            self.weights, self.num_samples, self.replacement, generator=self.generator
        )
        yield from draws.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """The indices of ``sampler`` in lists of ``batch_size``; the last list is shorter,
    unless ``drop_last`` drops it."""

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size}"
            )
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
