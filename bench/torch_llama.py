#!/usr/bin/env python3
"""Llama in PyTorch 2.x and workloads W4 and W5: the twin of nn/llama.h.

The same math as Hugging Face's LlamaForCausalLM, with its parameter names:
RMSNorm, rotate-half RoPE with rope_theta, SwiGLU, grouped-query attention,
no biases, a head tied or not. Not part of the build and not the parity
reference (tests/torch/hf_llama.py runs transformers itself); this is
PyTorch's side of the W4/W5 timing and memory figures, run beside `remat
bench --workload W4` by bench/compare.py. Needs PyTorch 2.x (a virtual environment
with torch from PyPI).

  python bench/torch_llama.py --workload W4 --threads 1 [--steps 10] [--rounds 3]
  python bench/torch_llama.py --workload W5 --device cuda          # Llama at 1B shape, on a GPU
  python bench/torch_llama.py --workload W5 --device meta          # shapes and parameter count only

Parameters (Hugging Face's names; C hidden, H heads, K kv heads, d = C / H,
F intermediate, V vocabulary):

  model.embed_tokens.weight (V, C)            model.norm.weight (C)
  model.layers.{i}.input_layernorm.weight (C) model.layers.{i}.post_attention_layernorm.weight (C)
  model.layers.{i}.self_attn.q_proj.weight (H d, C)   .k_proj.weight, .v_proj.weight (K d, C)
  model.layers.{i}.self_attn.o_proj.weight (C, H d)
  model.layers.{i}.mlp.gate_proj.weight, .up_proj.weight (F, C)   .down_proj.weight (C, F)
  lm_head.weight (V, C): only when untied

The step (forward, loss, backward, AdamW lr 3e-4), its timing, and the
memory figures are those of bench/torch_reference.py on the CPU (the RSS
rise of one steady-state step in a child process whose malloc returns
freed blocks at once; saved bytes under saved_tensors_hooks), and of
bench/gpu/torch_gpu.py on a GPU (the rise of max_memory_allocated over a
step above what is held before it). Gradients are zeroed in place, so they,
the parameters and AdamW's state are not in the step's peak. Batches are
random tokens in [0, V) with random next-token targets, drawn once from
--seed; the loss is the mean cross-entropy over all B x T positions (as W2).

W4: 6 layers, hidden 384, 6 heads, 2 kv heads, intermediate 1024, context
256, vocabulary 65 (characters), untied head, rope_theta 1e4, batch 8,
float32; 9.49 M parameters. W5: Llama 3.2 1B's shape (16 layers, hidden
2048, 32 heads, 8 kv heads, intermediate 8192, vocabulary 128256, context
2048, tied head, rope_theta 5e5), batch 4; 1.236 B parameters.
"""

import argparse
import dataclasses
import json
import math
import os
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_reference  # noqa: E402  (the CPU measurement: malloc settings, RSS sampling, saved bytes)

DTYPES = ("float32", "float64")


@dataclasses.dataclass
class LlamaConfig:
    vocab_size: int = 65
    hidden_size: int = 384
    intermediate_size: int = 1024
    num_hidden_layers: int = 6
    num_attention_heads: int = 6
    num_key_value_heads: int = 2
    max_position_embeddings: int = 256  # the longest context
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = False
    dtype: str = "float32"
    init_std: float = 0.02  # every linear weight and the embedding N(0, init_std); RMSNorm weights 1
    # "sdpa": F.scaled_dot_product_attention (causal, GQA without copying K and V where this torch
    # takes enable_gqa); "matmul": Hugging Face's eager attention (K and V repeated per head,
    # scores, causal mask, softmax, weighted sum as separate ops).
    attention: str = "sdpa"

    def head_dim(self):
        return self.hidden_size // self.num_attention_heads


# Workloads: the model's config and the batch size. W5 is Llama 3.2 1B's shape (tied head, rope_theta 5e5;
# its llama3 RoPE scaling is left out: it changes the angles, not the cost).
WORKLOADS = {
    "W4": dict(config=dict(), batch=8),
    "W5": dict(config=dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                           num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=2048,
                           rope_theta=500000.0, tie_word_embeddings=True), batch=4),
}


def build_classes(torch):
    """The modules, made once torch is imported (the memory child sets malloc up before that)."""
    nn, F = torch.nn, torch.nn.functional

    class RMSNorm(nn.Module):
        def __init__(self, size, eps, dtype, device):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(size, dtype=dtype, device=device))  # (C)
            self.eps = eps

        def forward(self, x):  # (B, T, C): x / sqrt(mean(x^2) + eps) * weight
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def rotate_half(x):  # (..., d): (x1, x2) -> (-x2, x1), halves of d
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    class Attention(nn.Module):
        def __init__(self, c, dtype, device):
            super().__init__()
            self.c = c
            d = c.head_dim()
            linear = lambda n_in, n_out: nn.Linear(n_in, n_out, bias=False, dtype=dtype, device=device)  # noqa: E731
            self.q_proj = linear(c.hidden_size, c.num_attention_heads * d)
            self.k_proj = linear(c.hidden_size, c.num_key_value_heads * d)
            self.v_proj = linear(c.hidden_size, c.num_key_value_heads * d)
            self.o_proj = linear(c.num_attention_heads * d, c.hidden_size)

        def forward(self, x, cos, sin):  # x (B, T, C); cos, sin (T, d)
            c = self.c
            B, T, _ = x.shape
            H, K, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim()
            q = self.q_proj(x).view(B, T, H, d).transpose(1, 2)  # (B, H, T, d)
            k = self.k_proj(x).view(B, T, K, d).transpose(1, 2)  # (B, K, T, d)
            v = self.v_proj(x).view(B, T, K, d).transpose(1, 2)  # (B, K, T, d)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            if c.attention == "sdpa" and K != H and sdpa_takes_gqa():
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # (B, H, T, d)
            else:
                # Query head h reads kv head h // (H / K), as Hugging Face's repeat_kv.
                k = k[:, :, None].expand(B, K, H // K, T, d).reshape(B, H, T, d)
                v = v[:, :, None].expand(B, K, H // K, T, d).reshape(B, H, T, d)
                if c.attention == "sdpa":
                    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                else:
                    scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)  # (B, H, T, T)
                    future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
                    y = F.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v  # (B, H, T, d)
            return self.o_proj(y.transpose(1, 2).reshape(B, T, H * d))

    class MLP(nn.Module):
        def __init__(self, c, dtype, device):
            super().__init__()
            linear = lambda n_in, n_out: nn.Linear(n_in, n_out, bias=False, dtype=dtype, device=device)  # noqa: E731
            self.gate_proj = linear(c.hidden_size, c.intermediate_size)
            self.up_proj = linear(c.hidden_size, c.intermediate_size)
            self.down_proj = linear(c.intermediate_size, c.hidden_size)

        def forward(self, x):  # (B, T, C): down(silu(gate x) * up x)
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class DecoderLayer(nn.Module):
        def __init__(self, c, dtype, device):
            super().__init__()
            self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps, dtype, device)
            self.self_attn = Attention(c, dtype, device)
            self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps, dtype, device)
            self.mlp = MLP(c, dtype, device)

        def forward(self, x, cos, sin):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin)
            return x + self.mlp(self.post_attention_layernorm(x))

    class Body(nn.Module):  # Hugging Face's LlamaModel: the names under "model."
        def __init__(self, c, dtype, device):
            super().__init__()
            self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size, dtype=dtype, device=device)
            self.layers = nn.ModuleList(DecoderLayer(c, dtype, device) for _ in range(c.num_hidden_layers))
            self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps, dtype, device)

    class Llama(nn.Module):
        """LlamaForCausalLM's layout; forward(ids (B, T)) -> logits (B, T, V)."""

        def __init__(self, config, device="cpu"):
            super().__init__()
            if config.hidden_size % config.num_attention_heads or config.num_attention_heads % config.num_key_value_heads:
                raise ValueError("LlamaConfig: hidden %d, heads %d, kv heads %d: heads must divide hidden and kv "
                                 "heads divide heads" % (config.hidden_size, config.num_attention_heads,
                                                         config.num_key_value_heads))
            if config.attention not in ("sdpa", "matmul"):
                raise ValueError("LlamaConfig: attention %r, expected 'sdpa' or 'matmul'" % config.attention)
            self.config = config
            dtype = getattr(torch, config.dtype)
            self.model = Body(config, dtype, device)
            self.lm_head = None
            if not config.tie_word_embeddings:
                self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False, dtype=dtype, device=device)
            d = config.head_dim()
            # inv_freq[i] = theta^(-2i/d), i < d/2: the rotation speed of each pair (i, i + d/2).
            inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64, device=device) / d))
            self.register_buffer("inv_freq", inv_freq.to(dtype), persistent=False)  # (d/2)
            with torch.no_grad():
                for module in self.modules():
                    if isinstance(module, (nn.Linear, nn.Embedding)):
                        module.weight.normal_(0.0, config.init_std)

        def head_weight(self):
            return self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

        def forward(self, ids):  # (B, T) -> (B, T, V)
            T = ids.shape[1]
            if T > self.config.max_position_embeddings:
                raise ValueError("sequence of %d tokens is longer than the context %d"
                                 % (T, self.config.max_position_embeddings))
            angles = torch.outer(torch.arange(T, dtype=self.inv_freq.dtype, device=ids.device), self.inv_freq)
            angles = torch.cat((angles, angles), dim=-1)  # (T, d): angle of position t for dims i and i + d/2
            cos, sin = angles.cos(), angles.sin()
            x = self.model.embed_tokens(ids)  # (B, T, C)
            for layer in self.model.layers:
                x = layer(x, cos, sin)
            return F.linear(self.model.norm(x), self.head_weight())

    return Llama


_SDPA_GQA = None


def sdpa_takes_gqa():
    """Whether this torch's scaled_dot_product_attention takes enable_gqa (2.5 and later)."""
    global _SDPA_GQA
    if _SDPA_GQA is None:
        import inspect

        import torch
        try:
            _SDPA_GQA = "enable_gqa" in inspect.signature(torch.nn.functional.scaled_dot_product_attention).parameters
        except (TypeError, ValueError):  # a builtin without a signature: try it
            q = torch.zeros(1, 2, 1, 2)
            try:
                torch.nn.functional.scaled_dot_product_attention(q, q[:, :1], q[:, :1], enable_gqa=True)
                _SDPA_GQA = True
            except TypeError:
                _SDPA_GQA = False
    return _SDPA_GQA


def build(torch, args, device):
    """(model, ids, targets, loss_fn) of the workload, parameters and batch on `device`."""
    spec = WORKLOADS[args.workload]
    config = LlamaConfig(**{**spec["config"], "attention": args.attention, "dtype": args.dtype})
    torch.manual_seed(args.seed)
    model = build_classes(torch)(config, device=device)
    batch = args.batch or spec["batch"]
    shape = (batch, config.max_position_embeddings)
    generator = torch.Generator().manual_seed(args.seed + 1)
    ids = torch.randint(config.vocab_size, shape, generator=generator).to(device)
    targets = torch.randint(config.vocab_size, shape, generator=generator).to(device)

    def loss_fn(logits, labels):  # mean next-token cross-entropy over (B, T)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))

    return model, ids, targets, loss_fn


def cpu_runner(torch, args):
    """torch_reference's Runner (steps, saved bytes, RSS rise) over the workload, with AdamW."""
    model, ids, targets, loss_fn = build(torch, args, "cpu")
    runner = torch_reference.Runner(torch, model, lambda i, t: loss_fn(model(i), t), ids, targets)
    runner.optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    return runner


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="W4", choices=sorted(WORKLOADS))
    parser.add_argument("--device", default="cpu", help="cpu, cuda[:N] or meta (shapes and parameters only)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (torch.set_num_threads)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps a round")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of --steps; step_ms_median is the median "
                        "of the rounds' medians")
    parser.add_argument("--warmup", type=int, default=torch_reference.WARMUP_STEPS)
    parser.add_argument("--batch", type=int, default=None, help="override the workload's batch size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="float32", choices=DTYPES)
    parser.add_argument("--attention", default="sdpa", choices=["sdpa", "matmul"],
                        help="F.scaled_dot_product_attention (default) or Hugging Face's eager ops")
    parser.add_argument("--policy", default="none", choices=["none"], help="keep-all only (taken for "
                        "bench/compare.py, which passes it to every engine)")
    parser.add_argument("--tf32", action="store_true", help="on a GPU: TF32 matmuls (off by default)")
    parser.add_argument("--timing-only", action="store_true", help="CPU: no memory child (its fields are null)")
    parser.add_argument("--memory-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 1 or args.rounds < 1 or args.warmup < 1:
        parser.error("--steps, --rounds and --warmup must be at least 1 (got %d, %d, %d)"
                     % (args.steps, args.rounds, args.warmup))
    return args


def timed_rounds(args, step, sync=lambda: None, peak=None):
    """Warm-ups, then --rounds x --steps timed steps: (losses, per-round median ms, every step's ms, peaks)."""
    losses = [step() for _ in range(args.warmup)]
    medians, times, peaks = [], [], []
    for _ in range(args.rounds):
        round_ms = []
        for _ in range(args.steps):
            before = peak.before() if peak else None
            sync()
            start = time.perf_counter()
            losses.append(step())
            sync()
            round_ms.append((time.perf_counter() - start) * 1e3)
            if peak:
                peaks.append(peak.rise(before))
        medians.append(statistics.median(round_ms))
        times += round_ms
    return losses, medians, times, peaks


def record(torch, args, device, model, losses, medians, times):
    """The run's JSON record, with `remat bench`'s field names."""
    c = model.config
    return {
        "workload": args.workload, "policy": args.policy, "threads": args.threads, "device": str(device),
        "step_ms_median": round(statistics.median(medians), 3), "step_ms_min": round(min(times), 3),
        "step_ms_max": round(max(times), 3), "round_medians_ms": [round(m, 3) for m in medians],
        "rounds": args.rounds, "steps_timed": args.steps * args.rounds,
        "predicted_peak_activation_bytes": None, "peak_total_bytes": None, "recompute_ms": 0, "recompute_flops": 0,
        "loss_first": losses[0], "loss_last": losses[-1],
        "parameters": sum(p.numel() for p in model.parameters()), "dtype": args.dtype,
        "batch": args.batch or WORKLOADS[args.workload]["batch"], "context": c.max_position_embeddings,
        "engine": "pytorch", "torch_version": torch.__version__, "attention": args.attention,
        "gqa": "enable_gqa" if args.attention == "sdpa" and sdpa_takes_gqa() else "repeat_kv",
    }


def run_cpu(args):
    if args.memory_only:
        malloc_ok = torch_reference.configure_malloc()  # before torch loads
        torch = import_torch(args)
        runner = cpu_runner(torch, args)
        for _ in range(args.warmup):
            runner.step()
        torch_reference.set_openblas_threads(args.threads)
        print(json.dumps({
            "saved_bytes_after_forward": runner.saved_bytes_after_forward(),
            "peak_activation_bytes": runner.peak_rss_rise(torch_reference.PEAK_STEPS),
            "peak_method": "rss_rise_sampled_0.5ms_max_of_%d_steps_in_a_child_process%s" % (
                torch_reference.PEAK_STEPS, "" if malloc_ok else "_mallopt_failed"),
        }))
        return
    memory = {"saved_bytes_after_forward": None, "peak_activation_bytes": None, "peak_method": None}
    if not args.timing_only:
        memory = memory_child(args)
    torch = import_torch(args)
    runner = cpu_runner(torch, args)
    runner.step()
    torch_reference.set_openblas_threads(args.threads)  # OpenBLAS is mapped once the first GEMM has run
    losses, medians, times, _ = timed_rounds(args, runner.step)
    out = record(torch, args, "cpu", runner.model, losses, medians, times)
    blas = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    out["blas"] = ":".join(torch_reference.loaded_libraries("blas")) or "none loaded"
    out["blas_config"] = "BLAS_INFO=" + (blas.group(1) if blas else "unknown")
    out.update(memory)
    print(json.dumps(out))


def memory_child(args):
    """The memory figures from a child process of this script (torch_reference.memory_in_a_child's reason)."""
    import subprocess
    command = [sys.executable, os.path.abspath(__file__), "--memory-only"] + [
        a for a in sys.argv[1:] if a not in ("--timing-only", "--memory-only")]
    child = subprocess.run(command, capture_output=True, text=True)
    if child.returncode != 0:
        sys.stderr.write(child.stderr)
        raise SystemExit("torch_llama: the memory child failed (exit %d): %s" % (child.returncode, " ".join(command)))
    return json.loads(child.stdout.strip().splitlines()[-1])


def run_gpu(args):
    """Timing and peaks on a GPU, as bench/gpu/torch_gpu.py measures them."""
    torch = import_torch(args)
    device = torch.device(args.device)
    if not torch.cuda.is_available():
        sys.exit("torch_llama: no GPU (torch.cuda.is_available() is False)")
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    model, ids, targets, loss_fn = build(torch, args, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

    def step():
        optimizer.zero_grad(set_to_none=False)
        loss = loss_fn(model(ids), targets)
        loss.backward()
        optimizer.step()
        return loss.item()

    class Peak:
        def before(self):
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            return torch.cuda.memory_allocated(device)

        def rise(self, before):
            return torch.cuda.max_memory_allocated(device) - before

    losses, medians, times, peaks = timed_rounds(args, step, lambda: torch.cuda.synchronize(device), Peak())
    out = record(torch, args, device, model, losses, medians, times)
    out.update({"gpu": torch.cuda.get_device_name(device), "tf32": args.tf32,
                "peak_activation_bytes": max(peaks), "peak_method": "cuda_max_memory_allocated_rise",
                "saved_bytes_after_forward": None})
    print(json.dumps(out))


def run_meta(args):
    """A forward and backward on the meta device: the shapes hold, and the parameter count."""
    torch = import_torch(args)
    model, ids, targets, loss_fn = build(torch, args, "meta")
    loss = loss_fn(model(ids), targets)
    loss.backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None]
    if missing:
        raise SystemExit("torch_llama: no gradient for %s" % ", ".join(missing))
    print(json.dumps({"workload": args.workload, "device": "meta", "parameters":
                      sum(p.numel() for p in model.parameters()), "logits_shape": list(model(ids).shape),
                      "dtype": args.dtype, "torch_version": torch.__version__}))


def import_torch(args):
    torch = torch_reference.import_torch()
    torch.set_num_threads(args.threads)
    return torch


def main():
    args = parse_args()
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # before torch starts
        os.environ[variable] = str(args.threads)
    if args.device == "meta":
        run_meta(args)
    elif args.device.startswith("cuda"):
        run_gpu(args)
    elif args.device == "cpu":
        run_cpu(args)
    else:
        raise SystemExit("torch_llama: --device %r: cpu, cuda[:N] or meta" % args.device)


if __name__ == "__main__":
    main()
