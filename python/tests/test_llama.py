"""remat.nn.LlamaForCausalLM from Python: Hugging Face folders both ways,
state_dict names, the labels convention (shift, -100), gradients against
float64 finite differences, and checkpointing with a budget of "50%"
(tests/torch/hf_llama.py holds the parity with transformers)."""
import json
import os

import numpy as np
import pytest

import remat

TINY = dict(vocab_size=23, hidden_size=16, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=32, rope_theta=10000.0, rms_norm_eps=1e-5,
            initializer_range=0.3, seed=3)
B, T = 2, 9


def batch(seed=0, vocab=23):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, size=(B, T), dtype=np.int64)
    labels = ids.copy()
    labels[rng.random((B, T)) < 0.3] = -100
    labels[0, 1] = ids[0, 1]
    return ids, labels


def step(model, ids, labels):
    """Loss and gradients (by name) of one step from cleared gradients."""
    for _, p in model.named_parameters():
        p.grad = None
    loss = model(ids, labels=labels).loss  # the logits let go before backward
    loss.backward()
    return loss.item(), {name: p.grad.numpy().copy() for name, p in model.named_parameters()}


def names(layers, tied):
    per_layer = ["input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                 "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
    out = {"model.embed_tokens.weight", "model.norm.weight"}
    out |= {f"model.layers.{i}.{n}.weight" for i in range(layers) for n in per_layer}
    return out if tied else out | {"lm_head.weight"}


@pytest.mark.parametrize("tied", [False, True])
def test_named_parameters_are_hugging_faces(tied):
    model = remat.nn.LlamaForCausalLM(**TINY, tie_word_embeddings=tied)
    params = dict(model.named_parameters())
    assert set(params) == names(2, tied)
    assert params["model.layers.1.self_attn.k_proj.weight"].shape == (2 * 4, 16)  # (Hkv D, C)
    assert params["model.layers.0.mlp.down_proj.weight"].shape == (16, 24)
    assert model.config["num_key_value_heads"] == 2 and model.config["tie_word_embeddings"] == tied


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_folder_round_trip_keeps_weights_and_loss(tmp_path, dtype):
    ids, labels = batch()
    model = remat.nn.LlamaForCausalLM(**TINY, dtype=dtype)
    model.save_pretrained(str(tmp_path / "one"))
    config = json.loads((tmp_path / "one" / "config.json").read_text())
    assert config["model_type"] == "llama" and config["num_key_value_heads"] == 2
    assert os.path.exists(tmp_path / "one" / "model.safetensors")
    model.save_pretrained(tmp_path / "shards", max_shard_size="4KiB")  # several files and their index
    assert os.path.exists(tmp_path / "shards" / "model.safetensors.index.json")
    for folder in ("one", "shards"):
        back = remat.nn.LlamaForCausalLM.from_pretrained(tmp_path / folder, dtype=dtype)
        assert isinstance(back, remat.nn.LlamaForCausalLM)
        theirs = dict(back.named_parameters())
        for name, p in model.named_parameters():
            np.testing.assert_array_equal(theirs[name].numpy(), p.numpy(), err_msg=name)
        assert step(back, ids, labels)[0] == step(model, ids, labels)[0]


def test_float32_files_load_into_float64_exactly(tmp_path):
    model = remat.nn.LlamaForCausalLM(**TINY)
    model.save_pretrained(str(tmp_path))
    wide = remat.nn.LlamaForCausalLM.from_pretrained(str(tmp_path), dtype="float64")
    assert wide.config["dtype"] == "float64"
    theirs = dict(wide.named_parameters())
    for name, p in model.named_parameters():
        assert theirs[name].numpy().dtype == np.float64
        np.testing.assert_array_equal(theirs[name].numpy(), p.numpy().astype(np.float64), err_msg=name)


def test_labels_are_shifted_inside_and_minus_100_is_ignored():
    model = remat.nn.LlamaForCausalLM(**TINY, dtype="float64")
    ids, labels = batch(1)
    out = model(ids, labels=labels)
    logits = out.logits.numpy()
    assert logits.shape == (B, T, 23)
    # Position t predicts labels[:, t + 1]; the mean over the labels that are not -100.
    log_p = logits - logits.max(-1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
    picked = [-log_p[b, t, labels[b, t + 1]] for b in range(B) for t in range(T - 1) if labels[b, t + 1] != -100]
    assert out.loss.item() == pytest.approx(np.mean(picked), rel=1e-12)
    # labels[:, 0] is never predicted; remat tensors work as NumPy arrays do.
    other = labels.copy()
    other[:, 0] = 7 if labels[0, 0] != 7 else 8
    assert model(remat.tensor(ids), labels=remat.tensor(other)).loss.item() == out.loss.item()
    assert model(ids).loss is None


def test_gradients_match_float64_finite_differences():
    model = remat.nn.LlamaForCausalLM(**TINY, dtype="float64", tie_word_embeddings=True)
    ids, labels = batch(2)
    _, grads = step(model, ids, labels)
    rng = np.random.default_rng(5)
    h = 1e-6
    for name, p in model.named_parameters():
        values = p.numpy()  # the parameter's own memory
        for flat in rng.choice(values.size, size=3, replace=False):
            index = np.unravel_index(flat, values.shape)
            original = values[index]
            values[index] = original + h
            up = model(ids, labels=labels).loss.item()
            values[index] = original - h
            down = model(ids, labels=labels).loss.item()
            values[index] = original
            numeric = (up - down) / (2 * h)
            assert grads[name][index] == pytest.approx(numeric, rel=1e-6, abs=1e-9), (name, index)


def test_a_budget_of_half_keep_alls_peak():
    ids, labels = batch(3)
    kept = remat.nn.LlamaForCausalLM(**TINY)
    kept.gradient_checkpointing_enable(policy="none")
    want = [step(kept, ids, labels) for _ in range(3)]
    keep_all_peak = remat.scheduler.simulate(remat.scheduler.checkpointing_profile(kept),
                                             ["keep"] * len(remat.scheduler.checkpointing_profile(kept)))["peak_bytes"]
    for policy in ("cost", "chain", "auto"):
        model = remat.nn.LlamaForCausalLM(**TINY)
        model.gradient_checkpointing_enable(policy=policy, budget="50%")
        for loss, grads in want:  # the first step already runs the plan (a rehearsal made it)
            assert step(model, ids, labels)[0] == loss
            for name, p in model.named_parameters():
                np.testing.assert_array_equal(p.grad.numpy(), grads[name], err_msg=f"{policy}: {name}")
            report = model.checkpointing_report()
            assert report["budget_bytes"] == keep_all_peak // 2
            assert report["peak_activation_bytes"] <= report["budget_bytes"]
            assert not report["profiling"]
        assert report["replayed_nodes"] > 0


def test_a_share_needs_labels_and_a_sane_number():
    model = remat.nn.LlamaForCausalLM(**TINY)
    with pytest.raises(remat.Error, match="share"):
        model.gradient_checkpointing_enable(policy="cost", budget="150%")
    with pytest.raises(remat.Error, match="optimal"):
        model.gradient_checkpointing_enable(policy="optimal", budget="50%")
    model.gradient_checkpointing_enable(policy="cost", budget="50%")
    ids, _ = batch()
    with pytest.raises(remat.Error, match="labels"):
        model(ids)


def test_make_plan_takes_a_share_of_the_profiles_keep_all_peak():
    model = remat.nn.LlamaForCausalLM(**TINY)
    model.gradient_checkpointing_enable(policy="none")
    ids, labels = batch()
    for _ in range(2):
        step(model, ids, labels)
    profile = remat.scheduler.checkpointing_profile(model)
    keep_all = remat.scheduler.simulate(profile, ["keep"] * len(profile))["peak_bytes"]
    plan = remat.scheduler.make_plan(profile, policy="cost", budget="50%")
    assert plan.budget == keep_all // 2 and plan.predicted["peak_bytes"] <= plan.budget
    with pytest.raises(remat.Error, match="share"):
        remat.scheduler.Checkpointer(policy="cost", budget="50%")
