"""remat.nn: modules with Hugging Face's parameter names (GPT-2's, Llama's)
and activation checkpointing (Module.gradient_checkpointing_enable,
checkpointing_report, explain).

    model = remat.nn.LlamaForCausalLM.from_pretrained("tiny-llama", dtype="float32")
    model.gradient_checkpointing_enable(policy="cost", budget="50%")
    out = model(input_ids, labels=labels)          # NumPy int64 (B, T) or remat tensors
    out.loss.backward()
    model.save_pretrained("out")                   # transformers' from_pretrained reads it
"""
import os as _os

import numpy as _np

from . import _remat, scheduler
from ._remat import Module, Linear, MLP, GPT, CausalLMOutput

__all__ = ["Module", "Linear", "MLP", "GPT", "CausalLMOutput", "LlamaForCausalLM"]


def _token_tensor(values, what):
    """A remat tensor as given, or a new int64 tensor from NumPy (or a list)."""
    if isinstance(values, _remat.Tensor):
        return values
    array = _np.asarray(values)
    if array.dtype.kind not in "iu":
        raise _remat.Error(f"LlamaForCausalLM: {what} of NumPy dtype {array.dtype}: token ids are integers (int64)")
    return _remat._from_numpy(_np.ascontiguousarray(array, dtype=_np.int64), False)


class LlamaForCausalLM(_remat.Llama):
    """Hugging Face's LlamaForCausalLM (nn/llama.h): its state_dict names
    (named_parameters), its folders (from_pretrained, save_pretrained) and
    its call: model(input_ids, labels=labels) with labels unshifted (position
    t predicts labels[:, t + 1]; -100 is ignored; the loss is the mean over
    the rest), returning .logits and .loss. LlamaForCausalLM(**config) makes
    one of random weights (keywords as in the `config` dict).

    gradient_checkpointing_enable also takes a budget as a share of
    keep-all's peak ("50%", as `remat bench --budget 50%`): the first call
    with labels rehearses the step on the meta device under keep-all, takes
    that share of its predicted peak as the budget in bytes, and rehearses
    again under the policy, so the first step already runs within it."""

    def __init__(self, **config):
        super().__init__(**config)
        self._pending_share = None  # (policy, share, rules) until the first call with labels

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, dtype="float32", seed=0):
        """A model of the folder's config.json and weights (model.safetensors or its shards), in `dtype`
        (float32 or float64, whatever the files hold: float64 files into float32 are an error)."""
        folder = _os.fspath(pretrained_model_name_or_path)
        model = cls(**_remat._llama_config(folder, dtype, seed))
        model._load_weights(folder)
        return model

    def save_pretrained(self, save_directory, max_shard_size=5_000_000_000):
        """config.json and the weights (model.safetensors, or shards of at most max_shard_size bytes, a number
        or text such as "64MiB", with model.safetensors.index.json), as transformers writes and reads them."""
        super().save_pretrained(_os.fspath(save_directory), max_shard_size)

    def __call__(self, input_ids, labels=None):
        ids = _token_tensor(input_ids, "input_ids")
        # Shifted here, not inside a rehearsal (where tensors hold no values).
        targets = None if labels is None else _remat._shift_labels(_token_tensor(labels, "labels"))
        if self._pending_share is not None:
            self._plan_share(ids, targets)
        return self._forward_targets(ids, targets)

    def forward(self, input_ids, labels=None):
        return self(input_ids, labels)

    def gradient_checkpointing_enable(self, policy="blocks", budget=None, **rules):
        self._pending_share = None
        share = None if budget is None else _remat._budget_share(budget)
        if share is None:
            return super().gradient_checkpointing_enable(policy=policy, budget=budget, **rules)
        # The policy and rules are checked now (a budget of one byte is only ever planned with below).
        super().gradient_checkpointing_enable(policy=policy, budget=1, **rules)
        super().gradient_checkpointing_enable(policy="none")
        self._pending_share = (policy, share, rules)

    def gradient_checkpointing_disable(self):
        self._pending_share = None
        super().gradient_checkpointing_disable()

    def _plan_share(self, ids, targets):
        """The budget of a share: keep-all's predicted peak on this call's graph, from a rehearsal."""
        if targets is None:
            raise _remat.Error("LlamaForCausalLM: a budget as a share of keep-all's peak is taken of the first "
                               "step's graph, which needs a loss: call the model with labels first")
        policy, share, rules = self._pending_share

        def step():
            self._forward_targets(ids, targets).loss.backward()

        self.rehearse_checkpointing(step)  # under keep-all (policy none)
        profile = scheduler.checkpointing_profile(self)
        keep_all = scheduler.simulate(profile, ["keep"] * len(profile.nodes))["peak_bytes"]
        self._pending_share = None
        super().gradient_checkpointing_enable(policy=policy, budget=int(share * keep_all), **rules)
        self.rehearse_checkpointing(step)

