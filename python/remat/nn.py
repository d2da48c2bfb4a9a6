"""remat.nn: modules with GPT-2's parameter names and activation checkpointing
(Module.gradient_checkpointing_enable, checkpointing_report, explain)."""
from ._remat import Module, Linear, MLP, GPT, CausalLMOutput

__all__ = ["Module", "Linear", "MLP", "GPT", "CausalLMOutput"]
