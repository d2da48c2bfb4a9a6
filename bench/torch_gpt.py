"""GPT in PyTorch: the twin of nn/gpt.h, same architecture, same parameter names.

The reference that remat's GPT is measured against (bench/torch_reference.py,
workload W2) and checked against (tests/torch/gpt_parity.py, gradient
parity). Not part of the build; needs Debian's /usr/bin/python3 with
python3-torch. The layout is GPT-2's (Hugging Face GPT2LMHeadModel, nanoGPT):

  transformer.wte.weight (V, C)             transformer.wpe.weight (block_size, C)
  transformer.h.{i}.ln_1.weight/bias (C)    transformer.h.{i}.attn.c_attn.weight (C, 3C), .bias (3C)
  transformer.h.{i}.attn.c_proj.weight (C, C), .bias (C)
  transformer.h.{i}.ln_2.weight/bias (C)    transformer.h.{i}.mlp.c_fc.weight (C, 4C), .bias (4C)
  transformer.h.{i}.mlp.c_proj.weight (4C, C), .bias (C)
  transformer.ln_f.weight/bias (C)          lm_head.weight (V, C): only when untied

Conv1D is Hugging Face's: y = x @ W + b with W stored (in, out). Attention is
written as matmul + causal mask + softmax (no fused kernel), as in remat.
state_dict() holds the parameters only (the causal mask is not persistent);
with tied weights it has no lm_head.weight.

  import torch_gpt
  model = torch_gpt.GPT(torch_gpt.GPTConfig(vocab_size=65, tie_weights=False, dtype="float64"))
  logits, loss = model(ids, targets)          # ids, targets int64 (B, T)
"""

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn

DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclasses.dataclass
class GPTConfig:
    vocab_size: int = 256
    block_size: int = 128  # the longest context
    n_layer: int = 6
    n_head: int = 4
    n_embd: int = 256
    dropout: float = 0.0
    tie_weights: bool = True  # lm_head shares transformer.wte.weight
    layer_norm_eps: float = 1e-5
    dtype: str = "float32"  # "float32" or "float64"
    init_std: float = 0.02  # every weight and embedding N(0, init_std); biases 0
    # "matmul": scores, causal mask, softmax and the weighted sum as separate
    # ops (as remat runs them); "sdpa": PyTorch's fused
    # F.scaled_dot_product_attention, the same math in one kernel.
    attention: str = "matmul"

    @classmethod
    def from_dict(cls, values):
        """A config from a dict (e.g. config.json); keys that are not fields are ignored."""
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in values.items() if key in names})

    def torch_dtype(self):
        if self.dtype not in DTYPES:
            raise ValueError("GPTConfig: dtype %r, expected one of %s" % (self.dtype, sorted(DTYPES)))
        return DTYPES[self.dtype]


class Conv1D(nn.Module):
    """Hugging Face's Conv1D: a linear layer with its weight stored (in, out)."""

    def __init__(self, n_in, n_out, dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out, dtype=dtype))  # (in, out)
        self.bias = nn.Parameter(torch.zeros(n_out, dtype=dtype))  # (out)

    def forward(self, x):  # (..., in) -> (..., out)
        return x @ self.weight + self.bias


class CausalSelfAttention(nn.Module):
    def __init__(self, config, dtype):
        super().__init__()
        if config.n_embd % config.n_head != 0:
            raise ValueError("n_embd %d is not a multiple of n_head %d" % (config.n_embd, config.n_head))
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.c_attn = Conv1D(config.n_embd, 3 * config.n_embd, dtype)
        self.c_proj = Conv1D(config.n_embd, config.n_embd, dtype)
        self.attention = config.attention
        if self.attention not in ("matmul", "sdpa"):
            raise ValueError("GPTConfig: attention %r, expected 'matmul' or 'sdpa'" % self.attention)
        self.dropout = config.dropout
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        # True above the diagonal (key j after query i): the positions a query may not see.
        mask = torch.triu(torch.ones(config.block_size, config.block_size, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)  # (block_size, block_size)

    def forward(self, x):  # (B, T, C)
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)  # 3 x (B, T, C)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, H, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        if self.attention == "sdpa":  # scale 1/sqrt(hs), as below
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=self.dropout if self.training else 0.0)  # (B, H, T, hs)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, H, T, T)
            att = att.masked_fill(self.mask[:T, :T], float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v  # (B, H, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config, dtype):
        super().__init__()
        self.c_fc = Conv1D(config.n_embd, 4 * config.n_embd, dtype)
        self.c_proj = Conv1D(4 * config.n_embd, config.n_embd, dtype)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):  # (B, T, C)
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")))


class Block(nn.Module):
    def __init__(self, config, dtype):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps, dtype=dtype)
        self.attn = CausalSelfAttention(config, dtype)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps, dtype=dtype)
        self.mlp = MLP(config, dtype)

    def forward(self, x):  # (B, T, C)
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config, generator=None):
        """Parameters initialised from `generator` (or torch's default generator)."""
        super().__init__()
        self.config = config
        dtype = config.torch_dtype()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd, dtype=dtype),
            wpe=nn.Embedding(config.block_size, config.n_embd, dtype=dtype),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config, dtype) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps, dtype=dtype),
        ))
        self.lm_head = None
        if not config.tie_weights:
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False, dtype=dtype)
        self.init_weights(generator)

    def init_weights(self, generator=None):
        """Weights and embeddings N(0, init_std), biases 0, LayerNorm weight 1 and bias 0."""
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, (Conv1D, nn.Linear, nn.Embedding)):
                    module.weight.normal_(0.0, self.config.init_std, generator=generator)
                    if getattr(module, "bias", None) is not None:
                        module.bias.zero_()
                elif isinstance(module, nn.LayerNorm):
                    module.weight.fill_(1.0)
                    module.bias.zero_()

    def head_weight(self):
        """The (V, C) matrix of the LM head: lm_head.weight, or transformer.wte.weight when tied."""
        return self.transformer.wte.weight if self.lm_head is None else self.lm_head.weight

    def forward(self, ids, targets=None):
        """ids int64 (B, T), T <= block_size; targets int64 (B, T) or None. Returns (logits (B, T, V), loss)."""
        B, T = ids.size()
        if T > self.config.block_size:
            raise ValueError("sequence of %d tokens is longer than block_size %d" % (T, self.config.block_size))
        positions = torch.arange(T, dtype=torch.long, device=ids.device)  # (T)
        x = self.transformer.drop(self.transformer.wte(ids) + self.transformer.wpe(positions))  # (B, T, C)
        for block in self.transformer.h:
            x = block(x)
        logits = F.linear(self.transformer.ln_f(x), self.head_weight())  # (B, T, V)
        loss = None if targets is None else lm_loss(logits, targets)
        return logits, loss


def lm_loss(logits, targets):
    """Mean next-token cross-entropy of logits (B, T, V) against targets (B, T)."""
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def count_parameters(model):
    return sum(p.numel() for p in model.parameters())
