"""remat.optim: SGD and AdamW over a model's parameters()."""
from ._remat import Optimizer, SGD, AdamW

__all__ = ["Optimizer", "SGD", "AdamW"]
