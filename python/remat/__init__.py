"""remat from Python: tensors with autograd, modules with activation
checkpointing planned by a cost model, optimizers (the C++ engine of this
repository, through nanobind; see docs/ and python/tests/ for examples).

    import remat, numpy as np
    x = remat.tensor(np.ones((2, 3)), requires_grad=True)   # a copy (remat.from_numpy shares the array)
    (x * x).sum().backward()
    x.grad.numpy()                      # 2 * x, without a copy

    model = remat.nn.GPT(n_layer=2, n_embd=64, n_head=2, block_size=32, vocab_size=64)
    model.gradient_checkpointing_enable(policy="cost", budget="64MiB")
    logits, loss = model(ids, targets)
    loss.backward()
    model.checkpointing_report()        # {'kept_bytes': ..., 'peak_activation_bytes': ...}

Engine errors arrive as remat.Error (a RuntimeError) with the engine's message.
"""
import numpy as _np

from . import _remat
from ._remat import (Error, Tensor, Generator, from_numpy, no_grad, zeros, ones, normal, randn, randint, matmul, linear,
                     softmax, log_softmax, causal_softmax, cross_entropy, layer_norm, dropout,
                     save_safetensors, load_safetensors, read_safetensors, write_safetensors, set_num_threads,
                     get_num_threads, gemm_info, gemm_summary)
from . import nn, optim, train
from . import scheduler

# The unary ops (relu, gelu, tanh, ...), each under its name in the C++ table (ops/unary.cpp's unary_ops).
_UNARY_NAMES = [name for name, *_ in _remat._unary_ops()]
globals().update({name: getattr(_remat, name) for name in _UNARY_NAMES})

__all__ = ["Error", "Tensor", "tensor", "from_numpy", "Generator", "no_grad", "zeros", "ones", "normal", "randn", "randint",
           "matmul", "linear", *_UNARY_NAMES, "softmax", "log_softmax",
           "causal_softmax", "cross_entropy", "layer_norm", "dropout", "save_safetensors", "load_safetensors", "read_safetensors",
           "write_safetensors", "set_num_threads", "get_num_threads", "gemm_info", "gemm_summary", "nn", "optim", "train", "scheduler"]


def tensor(data, dtype=None, requires_grad=False):
    """A new tensor holding a copy of `data` (a NumPy array, or anything
    numpy.asarray takes), of its shape: a number, a NumPy scalar
    (np.float32(3)) or a 0-d array makes a 0-d tensor, shape (). Python
    floats default to float32 and integers to int64, as in PyTorch (NumPy's
    float64 arrays and scalars stay float64); dtype: "float32", "float64" or
    "int64"."""
    array = _np.asarray(data)
    if dtype is None:
        if array.dtype.kind == "f":
            numpy_data = isinstance(data, (_np.ndarray, _np.generic))
            dtype = "float64" if array.dtype == _np.float64 and numpy_data else "float32"
        elif array.dtype.kind in "iub":
            dtype = "int64"
        else:
            raise Error(f"tensor: NumPy dtype {array.dtype} is not a number remat holds (float32, float64, int64)")
    # Not np.ascontiguousarray: it makes a 0-d array 1-d.
    return _remat._from_numpy(_np.asarray(array, dtype=dtype, order="C"), requires_grad)
