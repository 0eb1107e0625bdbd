"""The training loop behind ``minigrad train``.

One step:  x, y = task.get_batch("train", ...)   (from an RNG seeded by (seed, step) alone)
           logits, loss = model(x, y);  loss.backward();  clip;  AdamW step;  schedule step
           (an encoder-decoder on translate: src, tgt_in, y, and model(src, tgt_in, y))
           (--data-parallel: logits = nn.DataParallel(model)(x), then the loss of them)

Every ``eval_every`` steps the loop measures the validation loss and the task's own metrics
and saves a checkpoint; at the end it plots the loss curve and prints a few samples.

Resuming is exact: the batches depend only on (seed, step), and the checkpoint holds the
model, the optimizer's moments, the schedule's position and minigrad's RNG state, so a run
stopped at step 100 and resumed ends with the same weights as one that never stopped.
Resumed with a larger --steps, the schedule goes on from the learning rate the run had.
Ctrl-C (or SIGTERM) finishes the current step, saves a checkpoint and returns.

Nothing goes wrong quietly: a loss or gradient that is not finite stops training before the
step is taken, and the checkpoint on disk stays the last good one; a model and batch that
cannot fit in memory are refused before anything is allocated; a second run of one folder
is refused while the first holds its lock.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

import minigrad as mg
from minigrad import backend, nn, optim
from minigrad import rng as mg_rng
from minigrad.nn.utils import clip_grad_norm_
from models.checkpoint import check_size, load_checkpoint, read_checkpoint, save_checkpoint
from models.config import TrainConfig, check_config
from models.data import CorpusTask, Task, complete, make_task
from models.errors import TrainingDiverged, UsageError
from models.gpt import GPT, GPTConfig, next_token_loss
from models.memory import check_fits, parameter_count
from models.plots import plot_loss
from models.rnn_seq2seq import RNNSeq2Seq, RNNSeq2SeqConfig
from models.run import RunDir
from models.seq2seq import Seq2Seq, Seq2SeqConfig

LOG_EVERY = 10  # steps between "train" records in metrics.jsonl
VAL_BATCHES = 4  # batches averaged into one validation loss
VAL_STREAM = 2**32 - 1  # the validation batches' RNG is seeded by (seed, VAL_STREAM)


@dataclass
class TrainResult:
    """What ``train`` returns: where the run is, how far it got, and its last evaluation."""

    run: RunDir
    config: TrainConfig
    step: int
    interrupted: bool
    steps_done: int  # steps trained by this call (a resumed run started further on)
    wall_s: float  # seconds this call spent in its loop, evaluations included
    metrics: dict = field(default_factory=dict)
    samples: list[str] = field(default_factory=list)
    signal: int | None = None  # the signal that stopped it (SIGINT for Ctrl-C, SIGTERM)


# -- setting up --------------------------------------------------------------------------------


def resolve_device(device: str) -> str:
    try:
        return backend.check_device(device)
    except (ValueError, RuntimeError) as error:
        raise UsageError(f"--device {device}: {error}") from None


def prepare_task(config: TrainConfig) -> tuple[Task, TrainConfig]:
    """The task, and the config with its block size filled in and checked against it (and a
    text file's path made absolute, so that the run resumes from anywhere)."""
    task = make_task(config.task, config.data)
    block_size = config.block_size or task.default_block_size
    if block_size < task.min_block_size():
        raise UsageError(
            f"--block-size {block_size} is too short for --task {config.task}: "
            f"its examples need {task.min_block_size()}"
        )
    if isinstance(task, CorpusTask):
        task.check_block_size(block_size)
    data = str(Path(config.data).resolve()) if config.data is not None else None
    return task, replace(config, block_size=block_size, data=data)


def model_config(config: TrainConfig, vocab) -> GPTConfig | Seq2SeqConfig | RNNSeq2SeqConfig:
    """The config of the model that --model names, sized for ``vocab``."""
    if config.model != "gpt":
        return seq2seq_config(config, vocab)
    return GPTConfig(
        vocab_size=len(vocab),
        block_size=config.block_size,
        d_model=config.d_model,
        n_heads=config.n_heads,
        n_layers=config.n_layers,
        d_ff=config.d_ff,
        dropout=config.dropout,
        norm_first=config.norm_first,
        residual=config.residual,
        activation=config.activation,
    )


def seq2seq_config(config: TrainConfig, vocab) -> Seq2SeqConfig | RNNSeq2SeqConfig:
    special = {"pad_id": vocab.pad_id, "bos_id": vocab.bos_id, "eos_id": vocab.eos_id}
    sizes = {"vocab_size": len(vocab), "block_size": config.block_size, "d_model": config.d_model}
    if config.model == "seq2seq":
        return Seq2SeqConfig(
            **sizes,
            n_heads=config.n_heads,
            n_layers=config.n_layers,
            d_ff=config.d_ff,
            dropout=config.dropout,
            norm_first=config.norm_first,
            activation=config.activation,
            **special,
        )
    cell, _, attention = config.model.partition("-")  # "lstm-attn" -> "lstm", "attn"
    return RNNSeq2SeqConfig(
        **sizes, n_layers=config.n_layers, cell=cell, attention="dot" if attention else None,
        **special,
    )  # fmt: skip


# the model class of each config class, and the config class of each --model
MODEL_CLASSES = {GPTConfig: GPT, Seq2SeqConfig: Seq2Seq, RNNSeq2SeqConfig: RNNSeq2Seq}


def config_class(model: str) -> type:
    return {"gpt": GPTConfig, "seq2seq": Seq2SeqConfig}.get(model, RNNSeq2SeqConfig)


def build_model(config) -> nn.Module:
    """The GPT, Seq2Seq or RNNSeq2Seq that ``config`` describes."""
    return MODEL_CLASSES[type(config)](config)


def make_optimizer(model: nn.Module, config: TrainConfig) -> optim.AdamW:
    """AdamW that decays the weight matrices only, not biases, LayerNorm gains or embeddings
    (as GPT-2 and nanoGPT do: pulling those towards zero regularizes nothing)."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        is_matrix = param.ndim >= 2 and not name.endswith("_emb.weight")  # tok_emb, pos_emb, ...
        (decay if is_matrix else no_decay).append(param)
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.99))


def batch_rng(seed: int, step: int) -> np.random.Generator:
    """The RNG of step ``step``'s batch: the same on every run and after every resume."""
    return np.random.default_rng([seed, step])


@contextmanager
def preserved_rng(device: str) -> Iterator[None]:
    """Run the block (sampling during evaluation) without moving minigrad's RNG, so that
    evaluating does not change what training draws next (dropout)."""
    generator = mg_rng.generator(device)
    try:
        saved = generator.bit_generator.state
    except AttributeError:  # a CuPy generator's state cannot be read back
        yield
        return
    try:
        yield
    finally:
        generator.bit_generator.state = saved


class InterruptFlag:
    """While active, Ctrl-C (SIGINT) and SIGTERM only set ``requested`` (and ``signal``, the
    one that came); the loop stops at the end of its step, and the run saves. A second
    signal interrupts at once."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.requested = False
        self.signal: int | None = None
        self._previous: dict = {}

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested, self.signal = True, signum

    def __enter__(self) -> InterruptFlag:
        for signum in self.SIGNALS:
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread: signals are not ours to catch
                break
        return self

    def __exit__(self, *exc) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}


class ResumableCosine(optim.lr_scheduler.WarmupCosine):
    """``warmup_cosine``, which a run resumed with a larger --steps continues without a jump:
    from ``continued_from = (step, lrs)``, the rate of each group at that step, a half cosine
    down to ``min_lr`` at the new ``total_steps``:

        lr(t) = min_lr + (lr_s - min_lr) (1 + cos(pi (t - s) / (total_steps - s))) / 2
    """

    def __init__(self, optimizer, warmup_steps: int, total_steps: int, min_lr: float):
        self.continued_from: tuple[int, list[float]] | None = None
        super().__init__(optimizer, warmup_steps, total_steps, min_lr)

    def lr_at(self, group: int, step: int) -> float:
        if self.continued_from is None or step < self.continued_from[0]:
            return super().lr_at(group, step)
        start, lrs = self.continued_from
        progress = min(1.0, (step - start) / max(1, self.total_steps - start))
        return self.min_lr + (lrs[group] - self.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))

    def continue_from(self, step: int, lrs: list[float]) -> None:
        """From ``step`` on, decay from ``lrs`` to ``min_lr`` at ``total_steps``."""
        self.continued_from = (step, [float(lr) for lr in lrs])
        self.last_epoch = step
        self._set_lrs()

    def state_dict(self) -> dict:
        start = None
        if self.continued_from is not None:
            start = {"step": self.continued_from[0], "lrs": self.continued_from[1]}
        return {**super().state_dict(), "total_steps": self.total_steps, "continued_from": start}

    def load_state_dict(self, state_dict: dict) -> None:
        start = state_dict.get("continued_from")
        self.continued_from = None if start is None else (int(start["step"]), list(start["lrs"]))
        super().load_state_dict(state_dict)


# -- the trainer -------------------------------------------------------------------------------


class Trainer:
    """A model (GPT or encoder-decoder), its AdamW and schedule, and how far training has got."""

    def __init__(self, config: TrainConfig, task: Task, device: str):
        self.config, self.task, self.device = config, task, device
        mg.manual_seed(config.seed)
        self.model = build_model(model_config(config, task.vocab)).to(device)
        # --data-parallel: each half of the batch on its own thread, the same gradients
        self.parallel = nn.DataParallel(self.model) if config.data_parallel else None
        self.optimizer = make_optimizer(self.model, config)
        warmup = min(config.warmup_steps, config.steps)
        self.scheduler = ResumableCosine(self.optimizer, warmup, config.steps, config.min_lr)
        self.step = 0
        self.elapsed_s = 0.0  # wall time spent training, over all resumes
        self.saved_step: int | None = None  # the step of the checkpoint on disk

    def tensor(self, array: np.ndarray):
        return mg.tensor(array, device=self.device)

    def train_step(self) -> float:
        """One optimizer step on the batch of ``self.step``; returns its loss. A loss or a
        gradient norm that is not finite raises TrainingDiverged before the weights change."""
        c = self.config
        rng = batch_rng(c.seed, self.step)
        *inputs, y = self.task.get_batch("train", c.batch_size, c.block_size, rng)
        if self.parallel is not None:  # the loss of the gathered logits (see nn.DataParallel)
            logits, _ = self.parallel(*map(self.tensor, inputs))
            loss = next_token_loss(logits, self.tensor(y))
        else:
            _, loss = self.model(*map(self.tensor, inputs), self.tensor(y))
        value = loss.item()
        if not math.isfinite(value):
            raise self.diverged(f"the loss is {value}")
        self.optimizer.zero_grad()
        loss.backward()
        norm = float(clip_grad_norm_(self.model.parameters(), c.grad_clip).item())
        if not math.isfinite(norm):
            raise self.diverged(f"the gradient norm is {norm}")
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        return value

    def diverged(self, what: str) -> TrainingDiverged:
        kept = "no checkpoint was saved"
        if self.saved_step is not None:
            kept = f"the checkpoint of step {self.saved_step} is kept"
        return TrainingDiverged(
            f"training diverged at step {self.step + 1}/{self.config.steps}: {what} "
            f"(lr {self.optimizer.param_groups[0]['lr']:.3g}); lower --lr or add --grad-clip; "
            f"{kept}"
        )

    def validation_loss(self) -> float:
        """Mean loss over VAL_BATCHES validation batches, the same ones at every evaluation."""
        c = self.config
        rng = np.random.default_rng([c.seed, VAL_STREAM])
        losses = []
        self.model.eval()
        with mg.no_grad():
            for _ in range(VAL_BATCHES):
                *inputs, y = self.task.get_batch("val", c.batch_size, c.block_size, rng)
                losses.append(self.model(*map(self.tensor, inputs), self.tensor(y))[1].item())
        self.model.train()
        return float(np.mean(losses))

    def evaluate(self) -> dict:
        with preserved_rng(self.device):
            metrics = {"val_loss": self.validation_loss()}
            metrics.update(self.task.evaluate(self.model, device=self.device))
        return metrics

    def samples(self) -> list[str]:
        """The task's sample prompts, each followed by the model's completion."""
        if getattr(self.task, "seq2seq", False):  # "source -> translation"
            return self.task.samples(self.model, self.device)
        prompts = self.task.sample_prompts()
        with preserved_rng(self.device):
            completions = complete(
                self.model,
                self.task.vocab,
                prompts,
                max_new_tokens=self.task.sample_tokens,
                device=self.device,
                temperature=self.task.sample_temperature,
                stop=self.task.sample_stop,
            )
        return [prompt + completion for prompt, completion in zip(prompts, completions)]

    def save(self, run: RunDir) -> None:
        """Checkpoint the run; weights that are not finite are never written over one."""
        for name, param in self.model.named_parameters():
            if not bool(backend.array_module(param.array).isfinite(param.array).all()):
                raise self.diverged(f"{name} holds values that are not finite")
        trainer = {
            "step": self.step,
            "elapsed_s": self.elapsed_s,
            "rng": mg_rng.generator("cpu").bit_generator.state,
        }
        save_checkpoint(run.checkpoint_path, self.model, self.optimizer, self.scheduler, trainer)
        self.saved_step = self.step

    def restore(self, run: RunDir, saved_steps: int, state: dict | None = None) -> str | None:
        """Load the run's checkpoint (``state``, if it is already read; ``saved_steps``: the
        --steps it was trained towards). Where --steps changed, the schedule goes on from the
        rate at the checkpoint; returns the line that says how, or None."""
        path = run.checkpoint_path
        state = load_checkpoint(path, self.model, self.optimizer, state=state)
        try:
            trainer = state["trainer"]
            self.step = _whole(trainer["step"])
            self.elapsed_s = float(trainer["elapsed_s"])
            mg_rng.generator("cpu").bit_generator.state = _rng_state(trainer["rng"])
            return self._restore_schedule(state["scheduler"], saved_steps)
        except (KeyError, TypeError, ValueError, IndexError, OverflowError) as error:
            raise UsageError(f"{path}: its trainer state is damaged ({error!r:.100})") from None
        finally:
            self.saved_step = self.step

    def _restore_schedule(self, saved: dict, saved_steps: int) -> str | None:
        steps, before = self.config.steps, saved.get("total_steps", saved_steps)
        if before == steps:
            self.scheduler.load_state_dict(saved)
            return None
        lrs = [float(group["lr"]) for group in self.optimizer.param_groups]  # as saved
        warmup = self.config.warmup_steps
        if saved.get("continued_from") is None and self.step < warmup <= before:
            # the warm-up does not depend on --steps: the new schedule passes the same rate
            self.scheduler.load_state_dict({**saved, "continued_from": None})
            then = f"warms up to {self.config.lr:.3g} at step {warmup}, then follows a cosine"
        else:
            self.scheduler.continue_from(self.step, lrs)
            then = f"goes on from {lrs[0]:.3g} along a cosine to"
            if math.isclose(lrs[0], self.config.min_lr, rel_tol=1e-9):
                then = "stays at --min-lr"
        return (
            f"resuming at step {self.step} with --steps {steps} (it was {before}): the learning "
            f"rate {then} {self.config.min_lr:.3g} until step {steps}"
        )

    def run_config(self) -> dict:
        """What config.json holds: enough to rebuild the model and its vocabulary."""
        return {
            "train": self.config.to_dict(),
            "model": self.model.config.to_dict(),
            "vocab": self.task.vocab.to_string(),
            "parameters": self.model.num_parameters(),
        }


def _rng_state(saved: dict) -> dict:
    """The RNG state as NumPy reads it: the checkpoint holds its arrays (MT19937's key) as
    tensors."""

    def plain(value):
        return value.numpy() if isinstance(value, mg.Tensor) else value

    return {
        name: {k: plain(v) for k, v in value.items()} if isinstance(value, dict) else plain(value)
        for name, value in saved.items()
    }


def _whole(value) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"step {value!r} is not a whole number >= 0")
    return value


def describe(metrics: dict) -> str:
    """``val_loss 1.2340 | particle_acc 98.50%``: one evaluation as a log line."""
    parts = []
    for name, value in metrics.items():
        is_fraction = name.endswith("acc") or name == "exact_match"
        parts.append(f"{name} {value:.2%}" if is_fraction else f"{name} {value:.4f}")
    return " | ".join(parts)


def load_run_config(run: RunDir) -> TrainConfig:
    return TrainConfig.from_dict(run.read_config()["train"], source=f"{run.config_path} (train)")


def open_run(
    config: TrainConfig, out: str | Path | None, resume: str | Path | None, echo=print
) -> tuple[Trainer, RunDir]:
    """Check everything, then make (or reopen and lock) the run folder and the trainer.
    Nothing is written before all checks pass, so bad input never damages a run; the run
    folder comes back locked (``run.release()`` lets go)."""
    check_config(config)
    device = resolve_device(config.device)
    task, config = prepare_task(config)
    model = model_config(config, task.vocab)
    check_fits(model, config.batch_size, config.block_size, device)
    if resume is None:
        trainer = Trainer(config, task, device)
        run = RunDir.create(out, config.task)
        run.acquire()
        return trainer, run
    run = RunDir.existing(resume)
    saved = run.read_config()
    if saved["vocab"] != task.vocab.to_string():
        raise UsageError(
            f"--resume {run.path}: the data's characters differ from the run's vocabulary "
            "(did the --data file change?)"
        )
    saved_steps = load_run_config(run).steps
    run.acquire()
    try:
        state = read_checkpoint(run.checkpoint_path)
        check_size(run.checkpoint_path, state, parameter_count(model))
        trainer = Trainer(config, task, device)
        note = trainer.restore(run, saved_steps, state)
        if trainer.step > config.steps:
            raise UsageError(
                f"--steps {config.steps} is behind this run, which is at step {trainer.step}; "
                "--steps is the total number of steps"
            )
        run.keep_metrics_until(trainer.step)
    except BaseException:
        run.release()
        raise
    if note:
        echo(note)
    return trainer, run


def train(
    config: TrainConfig,
    out: str | Path | None = None,
    resume: str | Path | None = None,
    stop_at: int | None = None,
    progress: bool | None = None,
    echo: Callable[[str], None] = tqdm.write,
) -> TrainResult:
    """Train ``config.model`` (a GPT, or an encoder-decoder on translate) on
    ``config.task``, into a new run folder (``out``, or runs/<task>-<time>) or on from the
    run folder ``resume``.

    ``stop_at`` ends this call at that step, saving a checkpoint, as Ctrl-C would.
    ``progress=None`` shows the progress bar on a terminal only.
    """
    trainer, run = open_run(config, out, resume, echo)
    try:
        return _train(trainer, run, stop_at, progress, echo)
    finally:
        run.release()


def _train(trainer: Trainer, run: RunDir, stop_at, progress, echo) -> TrainResult:
    config = trainer.config
    run.write_config(trainer.run_config())
    if trainer.step == 0:
        trainer.save(run)  # from now on the folder can be resumed, whatever happens
    last = config.steps if stop_at is None else min(stop_at, config.steps)
    first_step, started = trainer.step, time.perf_counter()
    echo(
        f"{config.task}: {trainer.model.num_parameters():,} parameters, step "
        f"{trainer.step}/{config.steps}, run folder {run.path}"
    )
    # overflow is caught by the checks of every step, so NumPy's warnings would only repeat it
    quiet_numpy = np.errstate(over="ignore", invalid="ignore", divide="ignore")
    with InterruptFlag() as interrupt, quiet_numpy:
        metrics = _loop(trainer, run, last, progress, echo, interrupt)
        wall_s = time.perf_counter() - started
        trainer.save(run)
    plot_loss(run)
    interrupted = trainer.step < config.steps
    samples = [] if interrupted else trainer.samples()
    steps_done = trainer.step - first_step
    return TrainResult(
        run, config, trainer.step, interrupted, steps_done, wall_s, metrics, samples,
        signal=interrupt.signal,
    )  # fmt: skip


def _loop(trainer: Trainer, run: RunDir, last: int, progress: bool | None, echo, interrupt) -> dict:
    """Train until step ``last`` or a signal; log, evaluate and checkpoint on the way."""
    config = trainer.config
    metrics: dict = {}
    window = TrainWindow(trainer, run)
    bar = tqdm(
        total=config.steps,
        initial=trainer.step,
        desc=config.task,
        unit="step",
        dynamic_ncols=True,
        disable=None if progress is None else not progress,
    )
    with bar:
        while trainer.step < last and not interrupt.requested:
            step_start = time.perf_counter()
            window.losses.append(trainer.train_step())
            trainer.elapsed_s += time.perf_counter() - step_start
            bar.update(1)
            if trainer.step % LOG_EVERY == 0:
                record = window.log()
                bar.set_postfix(
                    loss=f"{record['loss']:.3f}", tok_s=f"{record['tokens_per_s']:,.0f}"
                )
            if trainer.step % config.eval_every == 0 or trainer.step == config.steps:
                eval_start = time.perf_counter()
                metrics = trainer.evaluate()
                if not math.isfinite(metrics["val_loss"]):
                    raise trainer.diverged(f"the validation loss is {metrics['val_loss']}")
                trainer.elapsed_s += time.perf_counter() - eval_start
                record = {"kind": "eval", "step": trainer.step, **metrics}
                run.append_metrics({**record, "elapsed_s": trainer.elapsed_s})
                echo(f"step {trainer.step}: {describe(metrics)}")
                trainer.save(run)
                window.restart()  # evaluating is not training speed
    if window.losses:
        window.log()
    return metrics


class TrainWindow:
    """The losses and speed of the steps since the last "train" record of metrics.jsonl."""

    def __init__(self, trainer: Trainer, run: RunDir):
        self.trainer, self.run = trainer, run
        self.tokens_per_step = trainer.config.batch_size * trainer.config.block_size
        self.restart()

    def restart(self) -> None:
        self.losses: list[float] = []
        self.start = time.perf_counter()

    def log(self) -> dict:
        """Append the window's mean loss and tokens/s to metrics.jsonl, then start anew."""
        seconds = max(time.perf_counter() - self.start, 1e-9)
        record = {
            "kind": "train",
            "step": self.trainer.step,
            "loss": float(np.mean(self.losses)),
            "lr": self.trainer.optimizer.param_groups[0]["lr"],
            "tokens_per_s": len(self.losses) * self.tokens_per_step / seconds,
            "elapsed_s": self.trainer.elapsed_s,
        }
        self.run.append_metrics(record)
        self.restart()
        return record
