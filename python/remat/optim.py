"""remat.optim: SGD and AdamW over a model's parameters(), and learning-rate
schedules with transformers' names (warm-up, then linear, cosine or
constant), each a LRScheduler whose step() follows each optimizer step.

    optimizer = AdamW(model.parameters(), lr=3e-4)
    scheduler = get_cosine_schedule_with_warmup(optimizer, num_warmup_steps=100, num_training_steps=1000)
"""
from ._remat import AdamW, Error, LRScheduler, Optimizer, SGD

__all__ = ["Optimizer", "SGD", "AdamW", "LRScheduler", "get_linear_schedule_with_warmup",
           "get_cosine_schedule_with_warmup", "get_cosine_with_min_lr_schedule_with_warmup",
           "get_constant_schedule_with_warmup", "get_constant_schedule"]


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    """lr from 0 up to its base over the warm-up, then linearly down to 0."""
    return LRScheduler(optimizer, "linear", num_warmup_steps, num_training_steps)


def _half_cosine(name, num_cycles, last_epoch):
    if num_cycles != 0.5:
        raise Error(f"{name}: num_cycles {num_cycles!r}: only 0.5 (one half cosine, down to the end) is supported")
    if last_epoch != -1:
        raise Error(f"{name}: last_epoch {last_epoch!r}: only -1 (a new schedule; a resumed run restores its "
                    f"step from its checkpoint)")


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, num_cycles=0.5, last_epoch=-1):
    """lr from 0 up to its base over the warm-up, then down a half cosine to 0."""
    _half_cosine("get_cosine_schedule_with_warmup", num_cycles, last_epoch)
    return LRScheduler(optimizer, "cosine", num_warmup_steps, num_training_steps)


def get_cosine_with_min_lr_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, num_cycles=0.5,
                                                last_epoch=-1, min_lr=None, min_lr_rate=None):
    """The half cosine down to a floor: min_lr, or min_lr_rate of the base lr
    (one of the two, as transformers asks)."""
    name = "get_cosine_with_min_lr_schedule_with_warmup"
    _half_cosine(name, num_cycles, last_epoch)
    if (min_lr is None) == (min_lr_rate is None):
        raise Error(f"{name}: give one of min_lr and min_lr_rate")
    if min_lr is not None:
        if not 0 <= min_lr <= optimizer.lr:
            raise Error(f"{name}: min_lr {min_lr!r} is outside [0, the optimizer's lr {optimizer.lr!r}]")
        min_lr_rate = min_lr / optimizer.lr if optimizer.lr > 0 else 0.0
    return LRScheduler(optimizer, "cosine", num_warmup_steps, num_training_steps, min_lr_rate)


def get_constant_schedule_with_warmup(optimizer, num_warmup_steps):
    """lr from 0 up to its base over the warm-up, then constant."""
    return LRScheduler(optimizer, "constant", num_warmup_steps, max(num_warmup_steps, 1))


def get_constant_schedule(optimizer):
    return LRScheduler(optimizer, "constant", 0, 1)
