"""``DataLoader``: read a dataset in batches, as ``torch.utils.data.DataLoader`` does.

For a map-style dataset, a sampler yields the indices (in order, or shuffled with
``shuffle=True``), a BatchSampler groups them ``batch_size`` at a time, and ``collate_fn``
(``default_collate``) stacks each group of examples into tensors. An IterableDataset is read
in its own order and cut into batches.
"""

from __future__ import annotations

from minigrad import rng
from minigrad.utils.data.collate import default_collate, default_convert
from minigrad.utils.data.dataset import IterableDataset
from minigrad.utils.data.sampler import BatchSampler, RandomSampler, SequentialSampler


def get_worker_info():
    """None: the DataLoader always reads in the calling process, never in a worker."""
    return None


class DataLoader:
    """Batches of ``dataset``, with PyTorch's arguments:

    batch_size (default 1; None: one example at a time, converted by ``default_convert``),
    shuffle (a new random order each pass, drawn from minigrad's RNG or ``generator``: for
    the same seed, the order PyTorch draws),
    sampler / batch_sampler (your own order), collate_fn (default ``default_collate``),
    drop_last (drop a last, short batch), generator (a ``mg.Generator`` for the shuffle).

    ``num_workers``, ``pin_memory``, ``timeout``, ``worker_init_fn``, ``prefetch_factor``,
    ``persistent_workers`` and the rest are accepted and checked as PyTorch checks them, but
    this loader always runs in the calling process, one batch at a time, whatever
    ``num_workers`` says (and pinned memory means nothing to NumPy arrays).
    """

    def __init__(
        self,
        dataset,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler=None,
        batch_sampler=None,
        num_workers: int = 0,
        collate_fn=None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn=None,
        multiprocessing_context=None,
        generator=None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ):
        _check_workers(num_workers, timeout, prefetch_factor, persistent_workers)
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            _check_iterable(shuffle, sampler, batch_sampler)
        elif sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, "
                    "sampler, and drop_last"
                )
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError(
                "batch_size=None option disables auto-batching and is mutually exclusive with "
                "drop_last"
            )
        if sampler is None and not iterable:
            sampler = (
                RandomSampler(dataset, generator=generator)
                if shuffle
                else SequentialSampler(dataset)
            )
        if batch_size is not None and batch_sampler is None and not iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        self.num_workers, self.pin_memory, self.timeout = num_workers, pin_memory, timeout
        self.worker_init_fn, self.prefetch_factor = worker_init_fn, prefetch_factor
        self.persistent_workers = persistent_workers
        self._auto_collation = batch_sampler is not None or (iterable and batch_size is not None)
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn

    def __iter__(self):
        # PyTorch's loader draws a seed here for its worker processes; one is drawn (and
        # unused) here too, so that the same seed gives PyTorch's very shuffles
        rng.draw_seed(rng.generator("cpu", self.generator))
        if isinstance(self.dataset, IterableDataset):
            return self._iterable_batches()
        if self.batch_sampler is None:
            return (self.collate_fn(self.dataset[index]) for index in self.sampler)
        return (self.collate_fn(self._fetch(indices)) for indices in self.batch_sampler)

    def _fetch(self, indices: list) -> list:
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems is not None:
            return getitems(indices)
        return [self.dataset[index] for index in indices]

    def _iterable_batches(self):
        if self.batch_size is None:
            for example in self.dataset:
                yield self.collate_fn(example)
            return
        batch = []
        for example in self.dataset:
            batch.append(example)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            size = len(self.dataset)  # (a TypeError if the dataset has no length, as in torch)
            if self.batch_size is None:
                return size
            if self.drop_last:
                return size // self.batch_size
            return (size + self.batch_size - 1) // self.batch_size
        if self.batch_sampler is None:
            return len(self.sampler)
        return len(self.batch_sampler)


def _check_workers(num_workers, timeout, prefetch_factor, persistent_workers) -> None:
    if num_workers < 0:
        raise ValueError(
            "num_workers option should be non-negative; use num_workers=0 to disable "
            "multiprocessing."
        )
    if timeout < 0:
        raise ValueError("timeout option should be non-negative")
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError(
            "prefetch_factor option could only be specified in multiprocessing.let num_workers "
            "> 0 to enable multiprocessing, otherwise set prefetch_factor to None."
        )
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers option needs num_workers > 0")


def _check_iterable(shuffle, sampler, batch_sampler) -> None:
    if shuffle not in (None, False):
        raise ValueError(
            f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
            f"shuffle={shuffle}"
        )
    if sampler is not None:
        raise ValueError(
            f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
            f"sampler={sampler}"
        )
    if batch_sampler is not None:
        raise ValueError(
            f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
            f"got batch_sampler={batch_sampler}"
        )
