#!/usr/bin/env python3
"""PyTorch on the GPU for W2 and W3 of docs/workloads.md, beside `remat bench --device cuda`.

One JSON line per run with remat's field names: step_ms_median (CUDA
synchronised around each step), peak_activation_bytes (the rise of
torch.cuda.max_memory_allocated over a step above the memory held before it:
parameters, gradients and optimizer state are not counted, as remat counts
activations and temporaries), loss_first, loss_last. Modes:

  eager       the model as it is (bench/torch_gpt.py, remat's twin)
  blocks      torch.utils.checkpoint around each transformer block (non-reentrant)
  compile     torch.compile with torch._functorch.config.activation_memory_budget = 0.5

TF32 is off unless --tf32 (both matmul and cuDNN). W2 uses SGD (lr 0.01) and
W3 AdamW (lr 6e-4), as `remat bench` does; batches are random tokens.

  python3 bench/gpu/torch_gpu.py --workload W3 --mode eager --steps 10
  python3 bench/gpu/torch_gpu.py --workload W2 --mode blocks --device cpu   # a smoke test without a GPU
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.utils.checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch_gpt  # noqa: E402

WORKLOADS = {
    "W2": dict(config=dict(vocab_size=256, block_size=128, n_layer=6, n_head=4, n_embd=256, tie_weights=False),
               batch=16, adamw=False),
    "W3": dict(config=dict(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768, tie_weights=True),
               batch=8, adamw=True),
}
WARMUP = 3


def checkpointed_forward(model, ids, targets):
    """The model's forward with each block under torch.utils.checkpoint."""
    B, T = ids.size()
    positions = torch.arange(T, dtype=torch.long, device=ids.device)
    x = model.transformer.drop(model.transformer.wte(ids) + model.transformer.wpe(positions))
    for block in model.transformer.h:
        x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
    logits = torch.nn.functional.linear(model.transformer.ln_f(x), model.head_weight())
    return logits, torch_gpt.lm_loss(logits, targets)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="W2", choices=sorted(WORKLOADS))
    parser.add_argument("--mode", default="eager", choices=["eager", "blocks", "compile"])
    parser.add_argument("--steps", type=int, default=10, help="timed steps after %d warm-ups" % WARMUP)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tf32", action="store_true")
    args = parser.parse_args()
    if args.steps < 1:
        parser.error("--steps must be at least 1, got %d" % args.steps)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_gpu: no GPU (torch.cuda.is_available() is False)")
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32

    spec = WORKLOADS[args.workload]
    torch.manual_seed(0)
    model = torch_gpt.GPT(torch_gpt.GPTConfig(**spec["config"])).to(device)
    generator = torch.Generator().manual_seed(2)
    shape = (spec["batch"], spec["config"]["block_size"])
    ids = torch.randint(spec["config"]["vocab_size"], shape, generator=generator).to(device)
    targets = torch.randint(spec["config"]["vocab_size"], shape, generator=generator).to(device)
    if spec["adamw"]:
        optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    forward = model
    if args.mode == "blocks":
        forward = lambda i, t: checkpointed_forward(model, i, t)  # noqa: E731
    elif args.mode == "compile":
        from torch._functorch import config as functorch_config
        functorch_config.activation_memory_budget = 0.5
        forward = torch.compile(model)

    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    times, peaks, losses = [], [], []
    for step in range(WARMUP + args.steps):
        optimizer.zero_grad(set_to_none=False)
        sync()
        before = torch.cuda.memory_allocated(device) if cuda else 0
        if cuda:
            torch.cuda.reset_peak_memory_stats(device)
        start = time.perf_counter()
        _, loss = forward(ids, targets)
        loss.backward()
        optimizer.step()
        sync()
        elapsed = (time.perf_counter() - start) * 1000.0
        losses.append(loss.item())
        if step >= WARMUP:
            times.append(elapsed)
            if cuda:
                peaks.append(torch.cuda.max_memory_allocated(device) - before)
    print(json.dumps({
        "workload": args.workload, "policy": args.mode, "device": str(device), "engine": "torch " + torch.__version__,
        "gpu": torch.cuda.get_device_name(device) if cuda else None, "tf32": args.tf32, "steps": args.steps,
        "step_ms_median": statistics.median(times), "step_ms_min": min(times), "step_ms_max": max(times),
        "peak_activation_bytes": max(peaks) if peaks else None,
        "loss_first": losses[0], "loss_last": losses[-1],
    }))


if __name__ == "__main__":
    main()
