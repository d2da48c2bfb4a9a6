"""remat.optim: SGD and AdamW over a model's parameters(), and learning-rate
schedules with transformers' names (warm-up, then linear, cosine or
constant), each a LRScheduler whose step() follows each optimizer step.

    optimizer = AdamW(model.parameters(), lr=3e-4)
    scheduler = get_cosine_schedule_with_warmup(optimizer, num_warmup_steps=100, num_training_steps=1000)
"""
from ._remat import Optimizer, SGD, AdamW, LRScheduler

__all__ = ["Optimizer", "SGD", "AdamW", "LRScheduler", "get_linear_schedule_with_warmup",
           "get_cosine_schedule_with_warmup", "get_constant_schedule_with_warmup", "get_constant_schedule"]


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    """lr from 0 up to its base over the warm-up, then linearly down to 0."""
    return LRScheduler(optimizer, "linear", num_warmup_steps, num_training_steps)


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, min_lr_rate=0.0):
    """lr from 0 up to its base over the warm-up, then down a half cosine to
    min_lr_rate of it (transformers' cosine_with_min_lr when above 0)."""
    return LRScheduler(optimizer, "cosine", num_warmup_steps, num_training_steps, min_lr_rate)


def get_constant_schedule_with_warmup(optimizer, num_warmup_steps):
    """lr from 0 up to its base over the warm-up, then constant."""
    return LRScheduler(optimizer, "constant", num_warmup_steps, max(num_warmup_steps, 1))


def get_constant_schedule(optimizer):
    return LRScheduler(optimizer, "constant", 0, 1)
