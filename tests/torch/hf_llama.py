"""Llama parity with Hugging Face's transformers (label torch), through remat's Python interface.

    hf_llama.py WORKDIR

1. transformers builds small LlamaForCausalLM models (multi-head, grouped and
   multi-query attention; tied and untied heads; rope_theta 1e4 and 5e5;
   rms_norm_eps 1e-5 and 1e-6) from a seed, with weights moved well off
   their initialisation so that every gradient term counts, and writes each
   with its own save_pretrained (safetensors, float32).
2. The reference: the loss and every gradient of transformers' eager model on
   random input_ids with labels (some -100). In float64 four steps of
   transformers 4.40.2 still run in float32 (RMSNorm, the rotary angles and
   their cos/sin, the eager softmax, the logits); they are patched to
   float64 here (float64_llama), and the patched model is checked against a
   float64 Llama written from scratch below (plain_llama) to 1e-12: a
   reference of float64 figures, not float32 ones.
3. remat.nn.LlamaForCausalLM.from_pretrained reads each folder and must match,
   per tensor (the loss and each gradient, |a - b| / |b| in the Frobenius
   norm): float32 within 1e-4 of transformers' float32, float64 within 1e-9
   of the patched float64 reference. Its save_pretrained folder read back by
   transformers gives the same weights.
4. Every checkpointing policy and preset gives keep-all's loss and gradients
   bit for bit, through gradient_checkpointing_enable (budgets as "50%").
5. bench/torch_llama.py, PyTorch's side of workload W4, gives transformers'
   logits (float64, 1e-12).

Prints one line per config and dtype with the largest relative error.
"""
import contextlib
import inspect
import math
import os
import sys
import textwrap
import warnings

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama import modeling_llama

import remat

WORK = sys.argv[1]
F32_TOLERANCE, F64_TOLERANCE, PATCH_TOLERANCE = 1e-4, 1e-9, 1e-12

CONFIGS = {
    "gqa_untied": dict(num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False, rope_theta=1e4,
                       rms_norm_eps=1e-5),
    "mqa_tied": dict(num_attention_heads=4, num_key_value_heads=1, tie_word_embeddings=True, rope_theta=5e5,
                     rms_norm_eps=1e-6),
    "mha_untied": dict(num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=False, rope_theta=5e5,
                       rms_norm_eps=1e-6),
    "mha_tied": dict(num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=True, rope_theta=1e4,
                     rms_norm_eps=1e-5),
}
BATCH, T = 3, 12


def make_folder(name, seed):
    """A LlamaForCausalLM of `name`'s config, written by save_pretrained; its folder."""
    config = LlamaConfig(vocab_size=37, hidden_size=32, intermediate_size=56, num_hidden_layers=2,
                         max_position_embeddings=64, attn_implementation="eager", **CONFIGS[name])
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # far from N(0, 0.02) and norms of 1: every term of every gradient matters
        for param_name, p in model.named_parameters():
            if param_name.endswith("layernorm.weight") or param_name.endswith("norm.weight"):
                p.copy_(1 + 0.3 * torch.randn_like(p))
            else:
                p.copy_(0.25 * torch.randn_like(p))
    folder = os.path.join(WORK, name)
    model.save_pretrained(folder, safe_serialization=True)
    return folder


def batch(seed, vocab):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (BATCH, T), generator=g)
    labels = ids.clone()
    labels[torch.rand(BATCH, T, generator=g) < 0.25] = -100  # ignored
    labels[0, 1] = ids[0, 1]  # at least one counted position
    return ids, labels


# --- the float64 reference -----------------------------------------------------

def _rms_norm_forward(self, hidden_states):
    """LlamaRMSNorm in the input's dtype (4.40.2 computes it in float32)."""
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


@torch.no_grad()
def _rotary_forward(self, x, position_ids):
    """LlamaRotaryEmbedding with inv_freq, the angles and cos/sin in float64 (4.40.2: float32)."""
    inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float64) / self.dim))
    freqs = position_ids[:, :, None].to(torch.float64) * inv_freq[None, None, :]  # (B, T, d/2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def _patched(function, old, new):
    """`function` recompiled with the one line `old` of its source replaced by `new`."""
    source = textwrap.dedent(inspect.getsource(function))
    source = source[source.index("def "):]  # without its decorators
    if source.count(old) != 1:
        raise SystemExit(f"hf_llama: {function.__qualname__} of transformers {modeling_llama.__file__} has "
                         f"{source.count(old)} copies of {old!r}, expected 1: the patch is for 4.40.2")
    namespace = {}
    exec(compile(source.replace(old, new), modeling_llama.__file__, "exec"), modeling_llama.__dict__, namespace)
    return namespace[function.__name__]


@contextlib.contextmanager
def float64_llama():
    """transformers' Llama with its four float32 steps in the model's dtype."""
    saved = {(cls, "forward"): cls.forward for cls in (modeling_llama.LlamaRMSNorm, modeling_llama.LlamaRotaryEmbedding,
                                                       modeling_llama.LlamaAttention, LlamaForCausalLM)}
    modeling_llama.LlamaRMSNorm.forward = _rms_norm_forward
    modeling_llama.LlamaRotaryEmbedding.forward = _rotary_forward
    modeling_llama.LlamaAttention.forward = _patched(
        modeling_llama.LlamaAttention.forward, "softmax(attn_weights, dim=-1, dtype=torch.float32)",
        "softmax(attn_weights, dim=-1, dtype=query_states.dtype)")
    LlamaForCausalLM.forward = _patched(LlamaForCausalLM.forward, "logits = logits.float()", "pass")
    try:
        yield
    finally:
        for (cls, attr), value in saved.items():
            setattr(cls, attr, value)


def hf_step(folder, dtype, ids, labels):
    """transformers' eager loss and gradients (by HF's parameter names) in `dtype`."""
    model = LlamaForCausalLM.from_pretrained(folder, torch_dtype=dtype, attn_implementation="eager")
    out = model(input_ids=ids, labels=labels)
    out.loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    return out.loss.detach(), grads


def plain_llama(folder, ids, labels):
    """A float64 Llama from scratch over the folder's float32 weights: (loss, grads by name)."""
    from safetensors.torch import load_file
    import json
    c = json.load(open(os.path.join(folder, "config.json")))
    weights = {name: w.to(torch.float64).requires_grad_() for name, w in
               load_file(os.path.join(folder, "model.safetensors")).items()}
    H, K = c["num_attention_heads"], c["num_key_value_heads"]
    C = c["hidden_size"]
    d = C // H

    def norm(x, w):  # x / sqrt(mean x^2 + eps) * w
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + c["rms_norm_eps"]) * w

    # RoPE as pairs (i, i + d/2) rotated by position * theta^(-2i/d).
    i = torch.arange(d // 2, dtype=torch.float64)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * torch.exp(-(2 * i / d) * math.log(c["rope_theta"]))
    cos, sin = torch.cos(angle), torch.sin(angle)  # (T, d/2)

    def rope(x):  # (B, T, heads, d)
        a, b = x[..., :d // 2], x[..., d // 2:]
        c_, s_ = cos[None, :, None, :], sin[None, :, None, :]
        return torch.cat((a * c_ - b * s_, b * c_ + a * s_), dim=-1)

    x = weights["model.embed_tokens.weight"][ids]  # (B, T, C)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for layer in range(c["num_hidden_layers"]):
        p = lambda name: weights[f"model.layers.{layer}.{name}.weight"]  # noqa: E731
        n = norm(x, p("input_layernorm"))
        q = rope((n @ p("self_attn.q_proj").T).view(BATCH, T, H, d))
        k = rope((n @ p("self_attn.k_proj").T).view(BATCH, T, K, d))
        v = (n @ p("self_attn.v_proj").T).view(BATCH, T, K, d)
        heads = []
        for h in range(H):
            kv = h // (H // K)  # the kv head query head h reads
            scores = torch.einsum("btd,bsd->bts", q[:, :, h], k[:, :, kv]) / math.sqrt(d)
            scores = scores.masked_fill(~causal, -math.inf)
            heads.append(torch.einsum("bts,bsd->btd", torch.softmax(scores, dim=-1), v[:, :, kv]))
        x = x + torch.cat(heads, dim=-1) @ p("self_attn.o_proj").T
        m = norm(x, p("post_attention_layernorm"))
        gate, up = m @ p("mlp.gate_proj").T, m @ p("mlp.up_proj").T
        x = x + (gate * torch.sigmoid(gate) * up) @ p("mlp.down_proj").T
    head = weights["model.embed_tokens.weight" if c["tie_word_embeddings"] else "lm_head.weight"]
    logits = norm(x, weights["model.norm.weight"]) @ head.T  # (B, T, V)
    # Position t predicts labels[t + 1]; -100 is ignored; the mean over the rest.
    targets = labels[:, 1:].reshape(-1)
    log_p = torch.log_softmax(logits[:, :-1].reshape(-1, logits.shape[-1]), dim=-1)
    counted = targets != -100
    loss = -log_p[counted.nonzero().squeeze(1), targets[counted]].mean()
    loss.backward()
    return loss.detach(), {name: w.grad for name, w in weights.items()}


# --- comparisons -------------------------------------------------------------------

def relative(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def worst_error(loss, grads, ref_loss, ref_grads, what):
    """The largest relative error over the loss and every gradient; the names must agree."""
    assert set(grads) == set(ref_grads), f"{what}: names {sorted(set(grads) ^ set(ref_grads))} differ"
    errors = {"loss": relative(loss, ref_loss)}
    errors.update({name: relative(grads[name], ref_grads[name]) for name in ref_grads})
    name = max(errors, key=errors.get)
    return errors[name], name


def remat_step(model, ids, labels):
    for _, p in model.named_parameters():
        p.grad = None
    out = model(ids.numpy(), labels=labels.numpy())
    loss = out.loss
    del out  # the logits let go before backward, as the plans assume
    loss.backward()
    return loss.item(), {name: p.grad.numpy().copy() for name, p in model.named_parameters()}


def check_parity(name, folder, seed):
    ids, labels = batch(seed, 37)
    with float64_llama():
        ref64 = hf_step(folder, torch.float64, ids, labels)
    assert ref64[0].dtype == torch.float64, f"{name}: the patched loss is {ref64[0].dtype}"
    plain = plain_llama(folder, ids, labels)
    unpatched = hf_step(folder, torch.float64, ids, labels)
    ref32 = hf_step(folder, torch.float32, ids, labels)

    patch_error, where = worst_error(*ref64, *plain, f"{name}: patched transformers against plain float64")
    assert patch_error <= PATCH_TOLERANCE, f"{name}: patched float64 reference off plain float64 by " \
                                           f"{patch_error:.2e} ({where})"
    unpatched_error, _ = worst_error(*unpatched, *plain, name)
    assert unpatched_error > 1e3 * patch_error, f"{name}: the patches changed nothing ({unpatched_error:.2e})"

    rows = []
    for dtype, ref, tolerance in (("float32", ref32, F32_TOLERANCE), ("float64", ref64, F64_TOLERANCE)):
        model = remat.nn.LlamaForCausalLM.from_pretrained(folder, dtype=dtype)
        loss, grads = remat_step(model, ids, labels)
        error, where = worst_error(loss, grads, *ref, f"{name} {dtype}")
        to_truth, _ = worst_error(loss, grads, *ref64, f"{name} {dtype}")
        rows.append(f"{name:12} {dtype}: max relative error {error:.2e} ({where}) against transformers {dtype}, "
                    f"{to_truth:.2e} against the float64 reference")
        assert error <= tolerance, rows[-1]
    print(f"{name:12} reference: patched float64 transformers against plain float64 {patch_error:.2e} "
          f"(unpatched {unpatched_error:.2e})")
    for row in rows:
        print(row)
    return model


def check_round_trip(name, folder):
    """remat's save_pretrained read by transformers: the same weights, bit for bit."""
    model = remat.nn.LlamaForCausalLM.from_pretrained(folder, dtype="float32")
    out = os.path.join(WORK, name + "_remat")
    model.save_pretrained(out)
    theirs = LlamaForCausalLM.from_pretrained(out).state_dict()
    ours = LlamaForCausalLM.from_pretrained(folder).state_dict()
    for key, value in ours.items():
        assert torch.equal(theirs[key], value), f"{name}: {key} changed through remat's folder"


def check_bench_twin(name, folder):
    """bench/torch_llama.py (PyTorch's side of W4) computes transformers' logits: float64, to 1e-12."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
    import torch_llama
    with float64_llama():
        hf = LlamaForCausalLM.from_pretrained(folder, torch_dtype=torch.float64, attn_implementation="eager")
    c = hf.config
    twin = torch_llama.build_classes(torch)(torch_llama.LlamaConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads, max_position_embeddings=c.max_position_embeddings,
        rms_norm_eps=c.rms_norm_eps, rope_theta=c.rope_theta, tie_word_embeddings=c.tie_word_embeddings,
        dtype="float64", attention="matmul"))
    state = hf.state_dict()
    twin.load_state_dict({key: state[key] for key in twin.state_dict()})
    ids, _ = batch(11, c.vocab_size)
    with float64_llama(), torch.no_grad():
        want = hf(input_ids=ids).logits
        error = relative(twin(ids), want)
    assert error <= PATCH_TOLERANCE, f"{name}: bench/torch_llama.py's logits off transformers' by {error:.2e}"
    return error


POLICIES = [("blocks", None), ("sqrt", None), ("cost", None), ("cost", "50%"), ("chain", "50%"), ("milp", "50%"),
            ("auto", "50%"), ("dtr", "50%"), ("save-matmuls", None), ("every-n-blocks:2", None),
            ("recompute-modules:attn,mlp,norm", None), ("recompute-modules:core_attn", None)]


def check_policies(folder, dtype):
    """Each policy's loss and gradients equal keep-all's bit for bit, over steps that re-plan."""
    ids, labels = batch(7, 37)
    kept = remat.nn.LlamaForCausalLM.from_pretrained(folder, dtype=dtype)
    want = [remat_step(kept, ids, labels) for _ in range(3)]
    for policy, budget in POLICIES:
        model = remat.nn.LlamaForCausalLM.from_pretrained(folder, dtype=dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a plan that drops nothing on so small a graph is said, not wrong
            model.gradient_checkpointing_enable(policy=policy, budget=budget)
            for loss_grads in want:
                loss, grads = remat_step(model, ids, labels)
                assert loss == loss_grads[0], f"{policy} {budget}: loss {loss} against keep-all's {loss_grads[0]}"
                for key, grad in loss_grads[1].items():
                    assert np.array_equal(grads[key], grad), f"{policy} {budget} {dtype}: {key} differs"
        report = model.checkpointing_report()
        replays = report["replayed_nodes"] + report["rebuilds"]
        assert replays > 0 or policy == "dtr", f"{policy} {budget}: replayed nothing ({report})"
    print(f"policies ({dtype}): {', '.join(p + (' ' + b if b else '') for p, b in POLICIES)}: "
          "loss and gradients equal keep-all's bit for bit")


def main():
    torch.set_num_threads(1)
    for seed, name in enumerate(CONFIGS):
        folder = make_folder(name, seed)
        check_parity(name, folder, 100 + seed)
        check_round_trip(name, folder)
        print(f"{name:12} bench/torch_llama.py: logits against patched float64 transformers "
              f"{check_bench_twin(name, folder):.2e}")
    for dtype in ("float32", "float64"):
        check_policies(os.path.join(WORK, "gqa_untied"), dtype)


if __name__ == "__main__":
    main()
