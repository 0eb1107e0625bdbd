"""How much memory a GPT needs, estimated from its config before anything is allocated, so
that a size that cannot fit is one line ("needs about 3.6 TiB, 20.5 GiB is available")
instead of NumPy's MemoryError or the kernel's out-of-memory killer.

    parameters   P = (V + T) d                        embeddings (V characters, T positions)
                   + L (4 (d^2 + d) + 2 d d_ff + d_ff + d + 4 d)     L blocks
                   + 2 d (pre-LN only) + d V + V       ln_f and the head
    training     4 P floats: the parameters, their gradients and AdamW's two moments
    activations  per block, about 12 B T d + 3 B T d_ff + 3 B H T^2 floats kept for backward,
                 and 3 B T V for the logits, their softmax and their gradient

all at float32 (4 bytes). The activation count is a floor rather than a bound: a run that
passes the check can still run out, and then the command says so in one line.
"""

from __future__ import annotations

from models.errors import UsageError

FLOAT32 = 4  # bytes


def parameter_count(config) -> int:
    """The number of parameters of the model ``config`` describes (a GPT, Seq2Seq or
    RNNSeq2Seq), from its sizes alone."""
    if hasattr(config, "cell"):
        return _rnn_seq2seq_parameters(config)
    if not hasattr(config, "residual"):
        return _seq2seq_parameters(config)
    d, d_ff = config.d_model, config.d_ff or 4 * config.d_model
    attention = 4 * (d * d + d)  # q, k, v and o projections with biases
    feedforward = d * d_ff + d_ff + d_ff * d + d
    norms = 2 * 2 * d  # ln1 and ln2, each a gain and a bias
    blocks = config.n_layers * (attention + feedforward + norms)
    embeddings = (config.vocab_size + config.block_size) * d
    final_norm = 2 * d if config.norm_first else 0
    head = d * config.vocab_size + config.vocab_size
    return embeddings + blocks + final_norm + head


def _seq2seq_parameters(config) -> int:
    """Seq2Seq: two embeddings and positions per side, L encoder blocks (attention, FFN, two
    norms), L decoder blocks (two attentions, FFN, three norms), final norms (pre-LN), head."""
    d, d_ff = config.d_model, config.d_ff or 4 * config.d_model
    attention = 4 * (d * d + d)
    feedforward = d * d_ff + d_ff + d_ff * d + d
    encoder_block = attention + feedforward + 2 * 2 * d
    decoder_block = 2 * attention + feedforward + 3 * 2 * d
    embeddings = 2 * (config.vocab_size + config.block_size) * d
    final_norms = 2 * 2 * d if config.norm_first else 0
    head = d * config.vocab_size + config.vocab_size
    blocks = config.n_layers * (encoder_block + decoder_block)
    return embeddings + blocks + final_norms + head


def _rnn_seq2seq_parameters(config) -> int:
    """RNNSeq2Seq: two embeddings, an encoder and a decoder of n_layers layers (g stacked
    blocks per layer: 1 RNN, 4 LSTM, 3 GRU; W_ih, W_hh and two biases), W_c, head."""
    d, gates = config.d_model, {"rnn": 1, "lstm": 4, "gru": 3}[config.cell]
    layer = gates * d * (d + d) + 2 * gates * d
    combine = 2 * d * d + d if config.attention else 0
    head = d * config.vocab_size + config.vocab_size
    return 2 * config.vocab_size * d + 2 * config.n_layers * layer + combine + head


def activation_count(config, batch_size: int, block_size: int) -> int:
    """Floats kept for backward by one forward pass on a (batch_size, block_size) batch."""
    tokens = batch_size * block_size
    if hasattr(config, "cell"):  # per step and layer, the gates and states of both sides
        return 2 * config.n_layers * tokens * 8 * config.d_model + 3 * tokens * config.vocab_size
    d_ff = getattr(config, "d_ff", None) or 4 * config.d_model
    d = config.d_model
    per_block = (
        12 * tokens * d + 3 * tokens * d_ff + 3 * batch_size * config.n_heads * block_size**2
    )
    # an encoder-decoder runs about 2.5 blocks' worth per layer: encoder, decoder, cross
    blocks = config.n_layers * per_block * (1 if hasattr(config, "residual") else 2.5)
    return int(blocks) + 3 * tokens * config.vocab_size + 2 * tokens * d


def needed_bytes(config, batch_size: int, block_size: int, training: bool = True) -> dict:
    """Bytes by part: "parameters", "optimizer" (gradients and AdamW state, when
    ``training``) and "activations" of one batch."""
    parameters = parameter_count(config) * FLOAT32
    return {
        "parameters": parameters,
        "optimizer": 3 * parameters if training else parameters,  # without AdamW: gradients
        "activations": activation_count(config, batch_size, block_size) * FLOAT32,
    }


def available_bytes(device: str) -> int | None:
    """Memory free for new arrays on ``device``: MemAvailable of /proc/meminfo on the CPU,
    CuPy's free memory (and its pool's free blocks) on the GPU; None where unknown."""
    if device == "cuda":
        from minigrad import backend

        try:
            cupy = backend.xp_for("cuda")
            free, _ = cupy.cuda.runtime.memGetInfo()
            return int(free) + int(cupy.get_default_memory_pool().free_bytes())
        except Exception:  # a driver that cannot say
            return None
    try:
        with open("/proc/meminfo", encoding="ascii") as file:
            for line in file:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_fits(
    config, batch_size: int, block_size: int, device: str, training: bool = True
) -> None:
    """A UsageError, saying how much is needed, when the estimate exceeds what is free."""
    parts = needed_bytes(config, batch_size, block_size, training)
    total = sum(parts.values())
    available = available_bytes(device)
    if available is None or total <= available:
        return
    state = "their gradients and AdamW's moments" if training else "their gradients"
    raise UsageError(
        f"this model and batch need about {format_bytes(total)} of memory at float32 "
        f"({format_bytes(parts['parameters'])} of parameters, {format_bytes(parts['optimizer'])} "
        f"for {state}, {format_bytes(parts['activations'])} of activations for a batch of "
        f"{batch_size} x {block_size} tokens), but {format_bytes(available)} is available on "
        f"{device}; lower --batch-size, --block-size, --d-model, --d-ff or --layers"
    )


def format_bytes(count: float) -> str:
    """1536 -> "1.5 KiB"."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    power = 0
    while count >= 1024 and power < len(units) - 1:
        count /= 1024
        power += 1
    return f"{count:.0f} B" if power == 0 else f"{count:.1f} {units[power]}"
