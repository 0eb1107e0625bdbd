"""``minigrad.utils.data`` beside ``torch.utils.data``: the same datasets, samplers and loaders
give batches of the same structure, types, dtypes and values (in order, where nothing is
shuffled), the same lengths, and the same errors; shuffles are permutations that repeat under
a seed or a Generator."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import minigrad as mg
from minigrad.utils import data

Pair = namedtuple("Pair", "x y")


def to_plain(batch):
    """A batch as nested Python lists and (dtype, values) pairs, the same for both frameworks."""
    if hasattr(batch, "numpy") and hasattr(batch, "shape"):
        values = batch.numpy()
        return ("tensor", str(values.dtype), values.shape, values.tolist())
    if isinstance(batch, dict):
        return {key: to_plain(value) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return (type(batch).__name__, [to_plain(item) for item in batch])
    return batch


class Squares:
    """A map-style dataset written against either framework's Dataset."""

    def __init__(self, module, size=10, kind="tuple"):
        self.module, self.size, self.kind = module, size, kind

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        m = self.module
        if self.kind == "tuple":
            return m.tensor([float(i), float(i * i)]), i
        if self.kind == "dict":
            return {"x": m.full((2,), float(i)), "label": i, "name": f"n{i}"}
        if self.kind == "namedtuple":
            return Pair(m.tensor(i), float(i) / 2)
        if self.kind == "numpy":
            return np.arange(3, dtype=np.float64) * i, np.int32(i)
        if self.kind == "list":
            return [m.tensor([i]), [i, i + 1]]
        raise ValueError(self.kind)


def loaders(kind="tuple", size=10, **options):
    torch = pytest.importorskip("torch")
    ours = data.DataLoader(Squares(mg, size, kind), **options)
    theirs = torch.utils.data.DataLoader(Squares(torch, size, kind), **options)
    return ours, theirs


@pytest.mark.parametrize("kind", ["tuple", "dict", "namedtuple", "numpy", "list"])
@pytest.mark.parametrize(
    "options",
    [
        dict(batch_size=4),
        dict(batch_size=4, drop_last=True),
        dict(batch_size=1),
        dict(batch_size=None),
    ],
    ids=["batch4", "drop_last", "batch1", "no_batching"],
)
def test_batches_match_torch(kind, options):
    ours, theirs = loaders(kind, **options)
    assert len(ours) == len(theirs)
    ours_batches, their_batches = [to_plain(b) for b in ours], [to_plain(b) for b in theirs]
    assert ours_batches == their_batches
    assert [to_plain(b) for b in ours] == ours_batches  # a second pass gives the same


def test_tensor_dataset_and_shuffle_cover_every_example():
    x = mg.arange(20).float().reshape(10, 2)
    y = mg.arange(10)
    dataset = data.TensorDataset(x, y)
    assert len(dataset) == 10 and dataset[3][1].item() == 3
    loader = data.DataLoader(dataset, batch_size=3, shuffle=True)
    passes = []
    for _ in range(2):
        seen = []
        for xb, yb in loader:
            np.testing.assert_array_equal(xb.numpy(), x.numpy()[yb.numpy()])
            seen += yb.tolist()
        assert sorted(seen) == list(range(10))
        passes.append(seen)
    assert passes[0] != passes[1]  # a new order each pass (1 in 10! to fail by chance)


def test_shuffle_repeats_under_manual_seed_and_generator():
    dataset = data.TensorDataset(mg.arange(50))

    def order(loader):
        return [int(i) for (batch,) in loader for i in batch.tolist()]

    mg.manual_seed(3)
    first = order(data.DataLoader(dataset, batch_size=7, shuffle=True))
    mg.manual_seed(3)
    assert order(data.DataLoader(dataset, batch_size=7, shuffle=True)) == first
    g = mg.Generator().manual_seed(1)
    with_g = order(data.DataLoader(dataset, batch_size=7, shuffle=True, generator=g))
    mg.manual_seed(99)  # the default generator has no say
    g.manual_seed(1)
    assert order(data.DataLoader(dataset, batch_size=7, shuffle=True, generator=g)) == with_g


@pytest.mark.parametrize("seed", [0, 3407])
def test_shuffles_are_torchs_for_the_same_seed(seed):
    torch = pytest.importorskip("torch")
    mg.manual_seed(seed), torch.manual_seed(seed)
    ours = data.DataLoader(data.TensorDataset(mg.arange(23)), batch_size=5, shuffle=True)
    theirs = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.arange(23)), batch_size=5, shuffle=True
    )
    for _ in range(2):  # each pass draws a new order, in step with torch's
        assert [x.tolist() for (x,) in ours] == [x.tolist() for (x,) in theirs]
    g, their_g = mg.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
    ours = data.DataLoader(list(range(10)), batch_size=4, shuffle=True, generator=g)
    theirs = torch.utils.data.DataLoader(
        list(range(10)), batch_size=4, shuffle=True, generator=their_g
    )
    assert [x.tolist() for x in ours] == [x.tolist() for x in theirs]
    for options in (dict(replacement=True, num_samples=40), dict(num_samples=17)):
        mg.manual_seed(seed), torch.manual_seed(seed)
        assert list(data.RandomSampler(range(7), **options)) == list(
            torch.utils.data.RandomSampler(range(7), **options)
        )
    split = data.random_split(range(10), [0.3, 0.7], generator=mg.Generator().manual_seed(seed))
    twin = torch.utils.data.random_split(
        range(10), [0.3, 0.7], generator=torch.Generator().manual_seed(seed)
    )
    assert [list(s) for s in split] == [list(s) for s in twin]


def test_tensor_dataset_refuses_mismatched_sizes():
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as theirs:
        torch.utils.data.TensorDataset(torch.zeros(3), torch.zeros(4))
    with pytest.raises(type(theirs.value), match=r"\(3,\), \(4,\)"):
        data.TensorDataset(mg.zeros(3), mg.zeros(4))


@pytest.mark.parametrize(
    "lengths", [[3, 7], [0.3, 0.7], [0.5, 0.5], [0.34, 0.33, 0.33], [1.0], [10, 0]], ids=str
)
def test_random_split_lengths_match_torch(lengths):
    torch = pytest.importorskip("torch")
    ours = data.random_split(range(10), lengths, generator=mg.Generator().manual_seed(0))
    theirs = torch.utils.data.random_split(range(10), lengths)
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    assert sorted(i for s in ours for i in s) == list(range(10))


def test_random_split_repeats_with_a_generator_and_refuses_bad_lengths():
    torch = pytest.importorskip("torch")
    a = data.random_split(range(10), [4, 6], generator=mg.Generator().manual_seed(5))
    b = data.random_split(range(10), [4, 6], generator=mg.Generator().manual_seed(5))
    assert [list(s) for s in a] == [list(s) for s in b]
    for bad in ([3, 3], [0.5, 0.6], [1.5, -0.5]):
        with pytest.raises(Exception) as theirs:
            torch.utils.data.random_split(range(10), bad)
        with pytest.raises(type(theirs.value)):
            data.random_split(range(10), bad)


def test_subset_and_concat():
    torch = pytest.importorskip("torch")
    for module, ours in ((torch.utils.data, False), (data, True)):
        subset = module.Subset(list(range(10, 20)), [4, 0, 2])
        assert [subset[i] for i in range(len(subset))] == [14, 10, 12]
        both = module.ConcatDataset([list(range(3)), list(range(5, 7))])
        assert len(both) == 5 and [both[i] for i in range(5)] == [0, 1, 2, 5, 6]
        assert both[-1] == 6
    added = data.TensorDataset(mg.arange(2)) + data.TensorDataset(mg.arange(3))
    assert len(added) == 5


def test_samplers_match_torch_where_nothing_is_random():
    torch = pytest.importorskip("torch")
    for drop_last in (False, True):
        ours = data.BatchSampler(data.SequentialSampler(range(10)), 3, drop_last)
        theirs = torch.utils.data.BatchSampler(
            torch.utils.data.SequentialSampler(range(10)), 3, drop_last
        )
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


@pytest.mark.parametrize(
    "options",
    [dict(), dict(num_samples=25), dict(num_samples=4), dict(replacement=True, num_samples=30)],
    ids=["plain", "more", "fewer", "replacement"],
)
def test_random_sampler_draws_as_torch_does(options):
    torch = pytest.importorskip("torch")
    ours = list(data.RandomSampler(range(10), generator=mg.Generator().manual_seed(0), **options))
    theirs = list(torch.utils.data.RandomSampler(range(10), **options))
    assert len(ours) == len(theirs)
    assert all(0 <= i < 10 for i in ours)
    if not options.get("replacement"):  # each round of ten is a permutation
        for start in range(0, len(ours) - len(ours) % 10, 10):
            assert sorted(ours[start : start + 10]) == list(range(10))
        assert len(set(ours)) == len(ours) or len(ours) > 10


def test_subset_and_weighted_samplers():
    indices = [5, 7, 9]
    assert sorted(data.SubsetRandomSampler(indices)) == indices
    weighted = list(data.WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 400))
    assert set(weighted) == {1, 3} and 0.6 < weighted.count(3) / 400 < 0.9
    assert sorted(data.WeightedRandomSampler([1, 1, 1], 3, replacement=False)) == [0, 1, 2]


BAD_LOADERS = {
    "num_workers=-1": dict(num_workers=-1),
    "sampler and shuffle": dict(shuffle=True, sampler="sampler"),
    "batch_sampler and batch_size": dict(batch_sampler="batches", batch_size=2),
    "batch_size=None and drop_last": dict(batch_size=None, drop_last=True),
    "batch_size=0": dict(batch_size=0),
    "prefetch without workers": dict(prefetch_factor=2),
    "persistent without workers": dict(persistent_workers=True),
    "timeout<0": dict(timeout=-1),
}


@pytest.mark.parametrize("name", BAD_LOADERS)
def test_bad_loader_options_raise_as_in_torch(name):
    torch = pytest.importorskip("torch")
    options = dict(BAD_LOADERS[name])
    for key, value in options.items():
        if value == "sampler":
            options[key] = list(range(4))
        if value == "batches":
            options[key] = [[0, 1], [2, 3]]
    with pytest.raises(Exception) as theirs:
        torch.utils.data.DataLoader(list(range(4)), **options)
    with pytest.raises(type(theirs.value)):
        data.DataLoader(list(range(4)), **options)


def test_workers_and_pinned_memory_are_accepted():
    loader = data.DataLoader(list(range(5)), batch_size=2, num_workers=4, pin_memory=True)
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4]]
    assert data.get_worker_info() is None


def test_collate_errors_match_torch():
    torch = pytest.importorskip("torch")
    for batch in ([object(), object()], [[1, 2], [3]], [np.array(["a"]), np.array(["b"])]):
        with pytest.raises(Exception) as theirs:
            torch.utils.data.default_collate(batch)
        with pytest.raises(type(theirs.value)):
            data.default_collate(batch)
    with pytest.raises(RuntimeError, match="equal size"):
        data.default_collate([mg.zeros(2), mg.zeros(3)])


def counter(base, n):
    """An iterable dataset of ``base`` (either framework's IterableDataset): 0 .. n-1."""

    class Counting(base):
        def __iter__(self):
            return iter(range(n))

        def __len__(self):
            return n

    return Counting()


@pytest.mark.parametrize(
    "options",
    [dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None)],
    ids=str,
)
def test_iterable_datasets_match_torch(options):
    torch = pytest.importorskip("torch")
    ours = data.DataLoader(counter(data.IterableDataset, 8), **options)
    theirs = torch.utils.data.DataLoader(counter(torch.utils.data.IterableDataset, 8), **options)
    assert [to_plain(b) for b in ours] == [to_plain(b) for b in theirs]
    assert len(ours) == len(theirs)
    with pytest.raises(ValueError):
        data.DataLoader(counter(data.IterableDataset, 8), shuffle=True)


def test_a_dataset_of_the_base_class_says_what_is_missing():
    with pytest.raises(NotImplementedError, match="__getitem__"):
        data.Dataset()[0]


def test_mg_utils_resolves():
    import minigrad.utils.data as imported

    assert mg.utils.data is imported and imported.DataLoader is data.DataLoader
