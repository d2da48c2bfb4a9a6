"""The Hugging Face round trip of remat's GPT (label torch).

    hf_gpt2.py DUMP_BINARY DTYPE TIED WORKDIR

1. transformers builds a small GPT2LMHeadModel with random weights (far from
   GPT-2's init, so that every gradient term is exercised) and writes it
   with save_pretrained; for a tied head, also its GPT2Model (names without
   "transformer.").
2. The C++ dump (tests/torch/gpt2_dir_dump.cpp) loads each folder, and
   writes the loss, every gradient, and the model saved back as a folder.
3. Here: the loss and every gradient against GPT2LMHeadModel's (relative
   error: 1e-4 in float32, 1e-9 in float64), and remat's folder read back
   by GPT2LMHeadModel.from_pretrained gives the same weights and logits.
"""
import json
import os
import subprocess
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel

dump, dtype_name, tied, work = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
dtype = torch.float64 if dtype_name == "float64" else torch.float32
tolerance = 1e-9 if dtype == torch.float64 else 1e-4
torch.manual_seed(0)

config = GPT2Config(vocab_size=11, n_positions=16, n_embd=16, n_layer=2, n_head=2, resid_pdrop=0.0,
                    embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=tied)
model = GPT2LMHeadModel(config).to(dtype)
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.randn_like(p) * 0.3)
model.eval()
hf_dir = os.path.join(work, "hf")
model.save_pretrained(hf_dir, safe_serialization=True)
folders = [hf_dir]
if tied:
    base_dir = os.path.join(work, "hf_base")
    model.transformer.save_pretrained(base_dir, safe_serialization=True)
    folders.append(base_dir)

ids = torch.randint(0, config.vocab_size, (3, 16), dtype=torch.int64)
save_file({"ids": ids}, os.path.join(work, "batch.safetensors"))
out = model(ids, labels=ids)
out.loss.backward()
hf_grads = {name: p.grad for name, p in model.named_parameters()}

def rel(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))

worst = 0.0
for folder in folders:
    result = os.path.join(work, "remat_" + os.path.basename(folder))
    subprocess.run([dump, "--in", folder, "--batch", os.path.join(work, "batch.safetensors"), "--out", result],
                   check=True)
    loss = json.load(open(os.path.join(result, "loss.json")))["loss"]
    loss_error = abs(loss - out.loss.item()) / abs(out.loss.item())
    assert loss_error <= tolerance, f"{folder}: loss {loss} against {out.loss.item()} ({loss_error:.2e})"
    grads = load_file(os.path.join(result, "grads.safetensors"))
    assert set(grads) == set(hf_grads), f"{folder}: gradients of {sorted(set(grads) ^ set(hf_grads))} differ in name"
    for name, grad in grads.items():
        error = rel(grad.to(dtype), hf_grads[name])
        worst = max(worst, error)
        assert error <= tolerance, f"{folder}: gradient of {name}: relative error {error:.2e} > {tolerance:.0e}"

    # remat's folder, read back by transformers: the same weights, the same logits.
    back = GPT2LMHeadModel.from_pretrained(os.path.join(result, "saved"), torch_dtype=dtype)
    back.eval()
    for name, p in model.state_dict().items():
        if name.endswith(".attn.bias") or name.endswith(".attn.masked_bias"):
            continue  # buffers: the causal mask
        assert torch.equal(back.state_dict()[name], p), f"{folder}: {name} changed on the way back"
    with torch.no_grad():
        logits_error = rel(back(ids).logits, model(ids).logits)
    assert logits_error == 0.0, f"{folder}: logits after the round trip differ by {logits_error:.2e}"

print(f"ok: {dtype_name}, tied {int(tied)}: {len(folders)} folder(s), loss and {len(hf_grads)} gradients within "
      f"{tolerance:.0e} (worst {worst:.2e}), read back by GPT2LMHeadModel.from_pretrained")
