"""Modules, optimizers and checkpointing from Python: a GPT that learns, every
policy bit-identical to keeping everything, budgets held, the report and
explain, safetensors, and a step equal to the C++ engine's bit for bit."""
import gc
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import remat

CONFIG = dict(vocab_size=32, block_size=16, n_layer=2, n_head=2, n_embd=32, dropout=0.1, seed=4)


def batch():
    return remat.randint(32, [4, 16], seed=1), remat.randint(32, [4, 16], seed=2)


def fresh_step(model, ids, targets):
    """One forward and backward from cleared gradients; the loss."""
    for p in model.parameters():
        p.grad = None
    loss = model(ids, targets)[1]  # the logits let go before backward, as the plan assumes
    loss.backward()
    return loss.item()


def keep_all_peak():
    model = remat.nn.GPT(**CONFIG)
    model.gradient_checkpointing_enable(policy="none")
    for _ in range(2):
        fresh_step(model, *batch())
    return model.checkpointing_report()["peak_activation_bytes"]


def test_a_gpt_learns_with_adamw():
    model = remat.nn.GPT(**CONFIG)
    optimizer = remat.optim.AdamW(model.parameters(), lr=1e-2)
    ids, targets = batch()
    losses = []
    for _ in range(8):
        _, loss = model(ids, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.3, losses
    assert all(p.grad is None for p in model.parameters())  # zero_grad sets them to None


@pytest.mark.parametrize("policy,share", [("blocks", None), ("sqrt", None), ("cost", None), ("cost", 0.7),
                                          ("chain", 0.7), ("auto", 0.7), ("dtr", 0.7)])
def test_every_policy_gives_keep_alls_loss_and_gradients_bit_for_bit(policy, share):
    ids, targets = batch()
    budget = int(share * keep_all_peak()) if share else None
    kept, replayed = remat.nn.GPT(**CONFIG), remat.nn.GPT(**CONFIG)  # the same weights and dropout streams
    replayed.gradient_checkpointing_enable(policy=policy, budget=budget)
    for _ in range(4):  # a profiling step, then steps under the plan (and its re-plans)
        kept_loss = fresh_step(kept, ids, targets)
        assert fresh_step(replayed, ids, targets) == kept_loss  # the report's peak runs to now: this step last
        for a, b in zip(kept.parameters(), replayed.parameters()):
            np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
    report = replayed.checkpointing_report()
    assert report["policy"] == policy and report["replayed_nodes"] + report["rebuilds"] > 0
    if budget and policy != "dtr":
        assert report["peak_activation_bytes"] <= budget
        # the prediction counts the loss Python holds (4 bytes), the allocator's rise from record() does not
        assert 0 <= report["predicted_peak_bytes"] - report["peak_activation_bytes"] <= 64


def test_a_budget_given_as_text_and_explain():
    model = remat.nn.GPT(**CONFIG)
    model.gradient_checkpointing_enable(policy="cost", budget="1GiB")
    for _ in range(2):
        fresh_step(model, *batch())
    assert model.checkpointing_report()["budget_bytes"] == 1 << 30
    rows = model.explain()
    assert rows[-1]["op"] == "cross_entropy" and rows[-1]["decision"] == "keep"
    assert {"position", "op", "block", "output_shape", "output_bytes", "flops", "forward_ms", "replay_cost_ms",
            "decision", "reason"} <= set(rows[0])
    assert {row["decision"] for row in rows} <= {"keep", "recompute"}
    assert any(row["block"] == "transformer.h.1" for row in rows)


def test_a_bad_budget_or_policy_is_an_error():
    model = remat.nn.GPT(**CONFIG)
    with pytest.raises(remat.Error, match="budget"):
        model.gradient_checkpointing_enable(policy="cost", budget="lots")
    with pytest.raises(remat.Error, match="optimal"):
        model.gradient_checkpointing_enable(policy="optimal")


def test_weights_survive_safetensors(tmp_path):
    ids, targets = batch()
    a, b = remat.nn.GPT(**{**CONFIG, "dropout": 0.0}), remat.nn.GPT(**{**CONFIG, "dropout": 0.0, "seed": 9})
    path = str(tmp_path / "gpt.safetensors")
    remat.save_safetensors(a, path)
    remat.load_safetensors(b, path)
    assert fresh_step(a, ids, targets) == fresh_step(b, ids, targets)
    assert set(remat.read_safetensors(path)) == {name for name, _ in a.named_parameters()}


@pytest.mark.skipif("REMAT_GPT_DUMP" not in os.environ, reason="REMAT_GPT_DUMP (tests/torch/gpt_dump.cpp) not given")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_gpt_step_equals_the_cpp_engines_bit_for_bit(tmp_path, dtype):
    subprocess.run([os.environ["REMAT_GPT_DUMP"], "--dtype", dtype, "--tied", "1", "--out", str(tmp_path)],
                   check=True, capture_output=True)
    config = json.loads((tmp_path / "config.json").read_text())
    model = remat.nn.GPT(vocab_size=config["vocab_size"], block_size=config["block_size"], n_layer=config["n_layer"],
                         n_head=config["n_head"], n_embd=config["n_embd"], dtype=dtype)
    remat.load_safetensors(model, str(tmp_path / "weights.safetensors"))
    data = remat.read_safetensors(str(tmp_path / "batch.safetensors"))
    loss = fresh_step(model, data["ids"], data["targets"])
    assert loss == json.loads((tmp_path / "loss.json").read_text())["loss"]
    expected = remat.read_safetensors(str(tmp_path / "grads.safetensors"))
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(p.grad.numpy(), expected[name].numpy(), err_msg=name)


def test_a_policy_written_in_python_tags_the_nodes_it_chooses():
    """A rule that replays every GELU and layer norm: the plan is the rule's,
    and the gradients stay keep-all's to the bit."""
    seen = []

    def rule(nodes):
        seen.append(nodes)
        return ["recompute" if node["op"] in ("gelu", "layer_norm") else "keep" for node in nodes]

    ids, targets = batch()
    explicit = {**CONFIG, "mlp": "explicit"}  # GELU as its own node, for the rule to name
    kept, replayed = remat.nn.GPT(**explicit), remat.nn.GPT(**explicit)
    replayed.gradient_checkpointing_enable(policy=rule)
    for _ in range(3):
        kept_loss = fresh_step(kept, ids, targets)
        assert fresh_step(replayed, ids, targets) == kept_loss
        for a, b in zip(kept.parameters(), replayed.parameters()):
            np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
    assert seen and {"op", "block", "inputs", "output_bytes", "read_by_backward", "forward_ms"} <= set(seen[0][0])
    rows = replayed.explain()
    dropped = {row["op"] for row in rows if row["decision"] == "recompute"}
    assert dropped == {"gelu", "layer_norm"}, dropped
    assert replayed.checkpointing_report()["policy"] == "custom"


def test_a_python_rule_kept_by_its_model_leaks_nothing_at_exit():
    """A rule whose globals hold the model it plans for (the model holds the
    rule in C++): the collector sees the cycle, and the interpreter ends
    without nanobind's "leaked" lines; a Checkpointer's rule the same."""
    code = ("import numpy as np, remat\n"
            "from remat.scheduler import Checkpointer\n"
            "model = remat.nn.GPT(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=16)\n"
            "model.gradient_checkpointing_enable(policy=lambda nodes: ['keep'] * len(nodes))\n"
            "ids = remat.tensor(np.zeros((2, 8), dtype=np.int64))\n"
            "for _ in range(2):\n"
            "    model(ids, ids)[1].backward()\n"
            "checkpointer = Checkpointer(policy=lambda nodes: [checkpointer] and ['keep'] * len(nodes))\n"
            "print('trained', flush=True)\n")
    run = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout == "trained\n", run.stderr
    assert "leaked" not in run.stderr, run.stderr


def test_a_model_and_its_python_rule_in_a_cycle_are_collected():
    released = []

    class Rule:
        def __init__(self, holder):
            self.holder = holder

        def __call__(self, nodes):
            return ["keep"] * len(nodes)

        def __del__(self):
            released.append(True)

    def make():
        model = remat.nn.MLP([4, 8, 2])
        model.gradient_checkpointing_enable(policy=Rule(model))
        rule = Rule(None)
        rule.holder = remat.scheduler.Checkpointer(policy=rule)

    make()
    gc.collect()
    assert len(released) == 2


def test_a_python_rule_that_answers_badly_is_an_error():
    model = remat.nn.GPT(**CONFIG)
    model.gradient_checkpointing_enable(policy=lambda nodes: ["maybe"] * len(nodes))
    with pytest.raises(remat.Error, match="'maybe'"):
        for _ in range(2):
            fresh_step(model, *batch())
