"""``minigrad.nn``: layers built from minigrad ops, with PyTorch's names.

module.py       Module: parameters, submodules, buffers, state_dict, hooks
parameter.py    Parameter
linear.py       Linear                  embedding.py   Embedding
normalization.py LayerNorm              dropout.py     Dropout
activation.py   ReLU, GELU, Tanh, ...   container.py   Sequential, ModuleList, ModuleDict, ...
activation_functions.py, loss_functions.py   F's activations and losses composed from ops
batchnorm.py    BatchNorm1d, BatchNorm2d flatten.py     Flatten, Unflatten
positional.py   PositionalEncoding      feedforward.py FeedForward
attention.py    MultiHeadAttention, the attention maths (F.scaled_dot_product_attention)
multihead.py    MultiheadAttention (PyTorch's)           transformer.py TransformerBlock
transformer_layers.py  Transformer, TransformerEncoder(Layer), TransformerDecoder(Layer)
rnn.py          RNN, LSTM               init.py        initialisers
gru.py          GRU                     cells.py       RNNCell, LSTMCell, GRUCell
utils.py        clip_grad_norm_         functional.py  F: the functions behind the layers
parallel.py     DataParallel: half the batch on each of two threads
loss.py         CrossEntropyLoss, MSELoss, NLLLoss, BCELoss, BCEWithLogitsLoss, KLDivLoss
"""

from minigrad.nn import functional, init, utils
from minigrad.nn.activation import (
    ELU,
    GELU,
    Identity,
    LeakyReLU,
    LogSoftmax,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from minigrad.nn.attention import MultiHeadAttention
from minigrad.nn.batchnorm import BatchNorm1d, BatchNorm2d
from minigrad.nn.cells import GRUCell, LSTMCell, RNNCell
from minigrad.nn.container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from minigrad.nn.dropout import Dropout
from minigrad.nn.embedding import Embedding
from minigrad.nn.feedforward import FeedForward
from minigrad.nn.flatten import Flatten, Unflatten
from minigrad.nn.gru import GRU
from minigrad.nn.linear import Linear
from minigrad.nn.loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    KLDivLoss,
    MSELoss,
    NLLLoss,
)
from minigrad.nn.module import Module, ModuleCall
from minigrad.nn.multihead import MultiheadAttention
from minigrad.nn.normalization import LayerNorm
from minigrad.nn.parallel import DataParallel
from minigrad.nn.parameter import Parameter
from minigrad.nn.positional import PositionalEncoding
from minigrad.nn.rnn import LSTM, RNN
from minigrad.nn.transformer import TransformerBlock
from minigrad.nn.transformer_layers import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "CrossEntropyLoss", "DataParallel", "Dropout", "Embedding", "LSTM", "RNN", "FeedForward",
    "GELU", "Identity", "LayerNorm", "Linear", "MSELoss", "Module", "ModuleCall", "ModuleList",
    "MultiHeadAttention", "Parameter", "PositionalEncoding", "ReLU", "Sequential", "Sigmoid",
    "Softmax", "Tanh", "TransformerBlock", "functional", "init", "utils",
    "BatchNorm1d", "BatchNorm2d", "BCELoss", "BCEWithLogitsLoss", "ELU", "Flatten", "KLDivLoss",
    "LeakyReLU", "LogSoftmax", "ModuleDict", "NLLLoss", "ParameterDict", "ParameterList",
    "SiLU", "Softplus", "Unflatten", "GRU", "GRUCell", "LSTMCell", "RNNCell",
    "MultiheadAttention", "Transformer", "TransformerDecoder", "TransformerDecoderLayer",
    "TransformerEncoder", "TransformerEncoderLayer",
]  # fmt: skip
