"""PyTorch's Transformer classes (Vaswani et al. 2017), with PyTorch's signatures and
parameter names, so that programs written for PyTorch run here and its weights load:

    TransformerEncoderLayer   self-attention, then a feed-forward network
    TransformerDecoderLayer   self-attention, cross-attention to the encoder's memory, FFN
    TransformerEncoder / TransformerDecoder   a stack of copies of one layer, and a norm
    Transformer               the encoder-decoder model of the paper

Each sublayer is wrapped in "Add & Norm". Post-LN (``norm_first=False``, the paper's):

    X = LayerNorm(X + SelfAttn(X))
    X = LayerNorm(X + CrossAttn(X, memory))        (decoder only)
    X = LayerNorm(X + FFN(X)),   FFN(X) = linear2(dropout(activation(linear1(X))))

Pre-LN (``norm_first=True``): X = X + SelfAttn(LayerNorm(X)), and so on. Each sublayer's
output passes a dropout before it is added. Sequences are (S, N, E) unless ``batch_first``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np

from minigrad import ops
from minigrad.backend import xp_for
from minigrad.errors import ShapeError
from minigrad.nn import init
from minigrad.nn.container import ModuleList
from minigrad.nn.dropout import Dropout
from minigrad.nn.linear import Linear
from minigrad.nn.module import Module
from minigrad.nn.multihead import MultiheadAttention
from minigrad.nn.normalization import LayerNorm
from minigrad.tensor import Tensor


def _activation(activation: str | Callable) -> Callable:
    if callable(activation):
        return activation
    if activation == "relu":
        return ops.relu
    if activation == "gelu":
        return ops.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation!r}")


class TransformerEncoderLayer(Module):
    """forward(src (S, N, E), src_mask=None, src_key_padding_mask=None, is_causal=False)
    -> (S, N, E). Masks as in ``nn.MultiheadAttention`` (True = not allowed)."""

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        dtype=None,
    ):
        super().__init__()
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, dtype=dtype
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(
        self, src: Tensor, src_mask=None, src_key_padding_mask=None, is_causal: bool = False
    ) -> Tensor:
        x = src
        if self.norm_first:
            # X = X + SelfAttn(LN(X)),  X = X + FFN(LN(X))
            x = x + self._self_attention(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._feed_forward(self.norm2(x))
        # X = LN(X + SelfAttn(X)),  X = LN(X + FFN(X))
        x = self.norm1(x + self._self_attention(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._feed_forward(x))

    def _self_attention(self, x, attn_mask, key_padding_mask, is_causal) -> Tensor:
        attended, _ = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            is_causal=bool(is_causal),
        )
        return self.dropout1(attended)

    def _feed_forward(self, x) -> Tensor:
        # FFN(X) = linear2(dropout(activation(linear1(X))))
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """forward(tgt (T, N, E), memory (S, N, E), tgt_mask=None, memory_mask=None,
    tgt_key_padding_mask=None, memory_key_padding_mask=None, tgt_is_causal=False,
    memory_is_causal=False) -> (T, N, E)."""

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        dtype=None,
    ):
        super().__init__()
        options = dict(dropout=dropout, bias=bias, batch_first=batch_first, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, **options)
        self.multihead_attn = MultiheadAttention(d_model, nhead, **options)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        x = tgt
        self_masks = (tgt_mask, tgt_key_padding_mask, tgt_is_causal)
        cross_masks = (memory_mask, memory_key_padding_mask, memory_is_causal)
        if self.norm_first:
            # X = X + SelfAttn(LN(X)),  X = X + CrossAttn(LN(X), memory),  X = X + FFN(LN(X))
            x = x + self._self_attention(self.norm1(x), *self_masks)
            x = x + self._cross_attention(self.norm2(x), memory, *cross_masks)
            return x + self._feed_forward(self.norm3(x))
        # X = LN(X + SelfAttn(X)),  X = LN(X + CrossAttn(X, memory)),  X = LN(X + FFN(X))
        x = self.norm1(x + self._self_attention(x, *self_masks))
        x = self.norm2(x + self._cross_attention(x, memory, *cross_masks))
        return self.norm3(x + self._feed_forward(x))

    def _self_attention(self, x, attn_mask, key_padding_mask, is_causal) -> Tensor:
        attended, _ = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            is_causal=bool(is_causal),
        )
        return self.dropout1(attended)

    def _cross_attention(self, x, memory, attn_mask, key_padding_mask, is_causal) -> Tensor:
        # queries from the decoder, keys and values from the encoder's output
        attended, _ = self.multihead_attn(
            x,
            memory,
            memory,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            is_causal=bool(is_causal),
        )
        return self.dropout2(attended)

    def _feed_forward(self, x) -> Tensor:
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


def _clones(layer: Module, count: int) -> ModuleList:
    """``count`` independent copies of ``layer`` (each with its own parameters)."""
    return ModuleList([copy.deepcopy(layer) for _ in range(count)])


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` one after another, then ``norm`` if given.
    forward(src, mask=None, src_key_padding_mask=None, is_causal=None)."""

    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self, src: Tensor, mask=None, src_key_padding_mask=None, is_causal: bool | None = None
    ) -> Tensor:
        x = src
        for layer in self.layers:
            x = layer(
                x,
                src_mask=mask,
                src_key_padding_mask=src_key_padding_mask,
                is_causal=bool(is_causal),
            )
        return self.norm(x) if self.norm is not None else x


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` one after another, then ``norm`` if given.
    forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False)."""

    def __init__(
        self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None
    ):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        x = tgt
        for layer in self.layers:
            x = layer(
                x,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=bool(tgt_is_causal),
                memory_is_causal=memory_is_causal,
            )
        return self.norm(x) if self.norm is not None else x


class Transformer(Module):
    """The encoder-decoder Transformer: memory = encoder(src), output = decoder(tgt, memory).

    forward(src (S, N, E), tgt (T, N, E), src_mask=None, tgt_mask=None, memory_mask=None,
    src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    src_is_causal=None, tgt_is_causal=None, memory_is_causal=False) -> (T, N, E).
    As in PyTorch, the encoder and the decoder each end in a LayerNorm (``encoder.norm``,
    ``decoder.norm``), and every weight matrix starts from xavier_uniform_. Embeddings and
    positional encodings are the caller's; ``tgt_mask`` is usually
    ``Transformer.generate_square_subsequent_mask(T)``.
    """

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable = "relu",
        custom_encoder: Module | None = None,
        custom_decoder: Module | None = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        dtype=None,
    ):
        super().__init__()
        layer_options = dict(
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            batch_first=batch_first,
            norm_first=norm_first,
            bias=bias,
            dtype=dtype,
        )
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, **layer_options)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, **layer_options)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def _reset_parameters(self) -> None:
        for param in self.parameters():
            if param.ndim > 1:
                init.xavier_uniform_(param)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask=None,
        tgt_mask=None,
        memory_mask=None,
        src_key_padding_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        batch_dim = 0 if self.batch_first else 1
        if src.ndim == 3 and tgt.ndim == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise RuntimeError(
                f"Transformer: the batch number of src {src.shape} and tgt {tgt.shape} must "
                "be equal"
            )
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError(
                f"Transformer: the feature number of src {src.shape} and tgt {tgt.shape} must "
                f"be equal to d_model={self.d_model}"
            )
        memory = self.encoder(
            src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal
        )
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: str | None = None, dtype=None) -> Tensor:
        """The causal mask (sz, sz): 0.0 on and below the diagonal, -inf above it (position
        i may not attend to j > i), as a float mask to add to the scores."""
        xp = xp_for(device or "cpu")
        dtype = np.dtype(dtype or np.float32)
        above = xp.triu(xp.ones((sz, sz), dtype=np.bool_), k=1)
        return Tensor(xp.where(above, -xp.inf, 0.0).astype(dtype))
