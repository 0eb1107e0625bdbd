"""Wrong-typed and out-of-range arguments, generated: every public creation function, a few
layers and every CLI option either works or raises one of PyTorch's error types with a
message of minigrad's own (or, from the shell, exits 2 with one line). Never an error raised
inside NumPy, a traceback, a hang or a crash.
"""

from __future__ import annotations

import contextlib
import io
import traceback
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigrad as mg
from minigrad import nn
from models.cli import main

CLEAR_ERRORS = (TypeError, ValueError, RuntimeError, IndexError, OverflowError)

# values of every kind a careless caller passes
ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.lists(st.integers(-3, 5), max_size=3),
    st.tuples(st.integers(-3, 5), st.floats(-3, 5)),
    st.sampled_from([mg.float32, mg.int64, "float32", object(), mg.ones(2), (2, -1), ()]),
)
SIZE = st.one_of(st.integers(-3, 6), st.floats(-2, 4), st.text(max_size=2), st.none())

CREATION = {
    "zeros": lambda a, b: mg.zeros(a, b),
    "ones": lambda a, b: mg.ones(a, dtype=b),
    "empty": lambda a, b: mg.empty(a, b),
    "full": lambda a, b: mg.full(a, b),
    "rand": lambda a, b: mg.rand(a, b),
    "randn": lambda a, b: mg.randn(a, b),
    "randint": lambda a, b: mg.randint(a, b),
    "randint3": lambda a, b: mg.randint(a, b, (2,)),
    "randperm": lambda a, b: mg.randperm(a, dtype=b),
    "arange": lambda a, b: mg.arange(a, b),
    "linspace": lambda a, b: mg.linspace(a, b, 3),
    "eye": lambda a, b: mg.eye(a, b),
    "tensor": lambda a, b: mg.tensor(a, dtype=b),
    "manual_seed": lambda a, b: mg.manual_seed(a),
    "Generator": lambda a, b: mg.Generator().manual_seed(a),
    "multinomial": lambda a, b: mg.multinomial(mg.ones(3), a, replacement=b),
    "Linear": lambda a, b: nn.Linear(a, b),
    "Embedding": lambda a, b: nn.Embedding(a, b),
    "LayerNorm": lambda a, b: nn.LayerNorm(a, eps=b),
    "Dropout": lambda a, b: nn.Dropout(a),
    "MultiHeadAttention": lambda a, b: nn.MultiHeadAttention(a, b),
}
QUICK = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
tried = {"calls": 0, "refused": 0}


def raised_inside_numpy(error: BaseException) -> bool:
    """Whether the error was raised by NumPy's own code (a leak), not by minigrad's."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and "/numpy/" in frames[-1].filename


def call_cleanly(name: str, make, a, b) -> None:
    tried["calls"] += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            make(a, b)
    except CLEAR_ERRORS as error:
        tried["refused"] += 1
        message = str(error)
        assert message and not raised_inside_numpy(error), (
            f"{name}({a!r}, {b!r}) leaked {type(error).__name__} from NumPy: {message}"
        )
    except MemoryError:
        pytest.fail(f"{name}({a!r}, {b!r}) tried to allocate what cannot fit")


@pytest.fixture(autouse=True)
def _keep_the_random_state():
    state = mg.get_rng_state()
    yield
    mg.set_rng_state(state)


@pytest.mark.parametrize("name", CREATION)
@QUICK
@given(a=st.one_of(SIZE, ANY_VALUE), b=st.one_of(SIZE, ANY_VALUE))
def test_creation_functions_and_layers_refuse_bad_arguments_clearly(name, a, b):
    if name in ("zeros", "ones", "empty", "rand", "randn", "full", "eye", "randperm") and (
        isinstance(a, int) and a > 10**6 or isinstance(b, int) and b > 10**6
    ):
        a = 10**6 + 1 if isinstance(a, int) and a > 10**6 else a  # (a size that fits)
        b = 3 if isinstance(b, int) and b > 10**6 else b
    call_cleanly(name, CREATION[name], a, b)


def test_a_refused_seed_leaves_the_random_state_as_it_was():
    before = mg.get_rng_state()
    with pytest.raises(CLEAR_ERRORS):
        mg.manual_seed(2**70)
    assert mg.get_rng_state().tolist() == before.tolist()
    mg.randn(2)  # still works


# -- the command line ---------------------------------------------------------------------

OPTIONS = {
    "train": ["--steps", "--lr", "--seed", "--batch-size", "--d-model", "--layers", "--heads",
              "--d-ff", "--block-size", "--dropout", "--grad-clip", "--task"],
    "sample": ["--seed", "--max-new-tokens", "--temperature", "--top-k", "--run", "--device"],
    "graph": ["--layers", "--seed", "--run", "--d-model", "--heads"],
    "study": ["NAME", "--seeds"],
}  # fmt: skip
BAD_VALUES = st.one_of(
    st.sampled_from(["-1", "0", "nan", "inf", "-inf", "1e400", "abc", "", "3.5", "999999999999"]),
    st.integers(-(10**12), 10**12).map(str),
    st.text(alphabet="-0123456789.eE", max_size=6),
)


LENGTHS = ("--steps", "--max-new-tokens")  # a huge valid one runs for ever


def _positive(value: str) -> bool:
    try:
        return float(value) > 0
    except ValueError:
        return False


def is_plain_number(value: str) -> bool:
    """A value that a numeric option accepts (the command would then really run): skipped."""
    try:
        number = float(value)
    except ValueError:
        return False
    return 0 <= number <= 10**6


def run_cli(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
    return code, err.getvalue()


@pytest.mark.parametrize("command", OPTIONS)
@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_bad_cli_options_are_exit_2_and_one_line(command, data, tmp_path_factory):
    option = data.draw(st.sampled_from(OPTIONS[command]))
    value = data.draw(BAD_VALUES)
    if is_plain_number(value) or option in LENGTHS and _positive(value):
        return  # valid: it would train, sample or draw for real (and as long as it is told)
    out = tmp_path_factory.mktemp("cli")
    argv = [command, value] if option == "NAME" else [command, option, value]
    if command == "train":  # refused before training, or trained in an instant
        argv += ["--out", str(out / "run")] + ([] if option == "--steps" else ["--steps", "0"])
    if command == "study":
        argv += ["--out", str(out)] + (["--seeds", "0"] if option == "NAME" else ["depth"])
    if command == "graph":
        argv += ["--out", str(out / "g.svg")]
    code, err = run_cli(argv)
    tried["calls"] += 1
    if code in (0, None):
        return  # a value that happens to be valid
    assert code == 2, f"minigrad {' '.join(argv)}: exit {code}\n{err}"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, f"minigrad {' '.join(argv)}:\n{err}"
