"""remat.scheduler from Python (python/scheduler.cpp): observers hear the
engine's events in order with their bytes, a Python tag rule changes what
is replayed (never the gradients), the simulator's peak equals the
allocator's, plans read prices set by hand, the Checkpointer plans from a
rehearsal, and bad tags, policies and categories are errors that name them."""
import json
import os
import subprocess
import warnings

import numpy as np
import pytest

import remat
from remat import scheduler

KIB = 1024


def inputs():
    """x and W (128, 128) from one generator, as parameters (not activations)."""
    g = remat.Generator(7)
    with scheduler.category("parameter"):
        return (remat.normal([128, 128], generator=g).requires_grad_(),
                remat.normal([128, 128], std=0.1, generator=g).requires_grad_())


def abc(x, w):
    """A = relu(x), B = tanh(x @ W), C = A + B, loss = sum(C): the tour's graph."""
    return (remat.relu(x) + remat.tanh(x @ w)).sum()


class Recorder(scheduler.Observer):
    def __init__(self):
        self.events = []

    def recorded(self, node):
        self.events.append(("recorded", node["op"], node))

    def replayed(self, node, in_place):
        self.events.append(("replayed", node["op"], in_place))

    def backward_finished(self, node):
        self.events.append(("backward", node["op"], scheduler.memory_stats()["live_transient"]))

    def pass_finished(self, root):
        self.events.append(("pass", root["op"], None))


def step(x, w, drop=(), observer=None):
    """One step of abc with the ops in `drop` tagged recompute; the events heard."""
    x.grad = w.grad = None
    observer = observer or Recorder()
    with observer, scheduler.RecomputeScope(lambda node: "recompute" if node["op"] in drop else "keep"):
        loss = abc(x, w)
    loss.backward()
    return observer.events


def test_an_observer_hears_each_node_in_order_with_its_bytes_and_what_backward_reads():
    events = step(*inputs())
    recorded = [e[2] for e in events if e[0] == "recorded"]
    assert [n["op"] for n in recorded] == ["relu", "matmul", "tanh", "add", "sum"]
    assert [n["output_bytes"] for n in recorded] == [64 * KIB] * 4 + [4]
    assert [n["saved"] for n in recorded] == [["output"], [0, 1], ["output"], [], []]
    assert all(n["tag"] == "keep" for n in recorded)
    ids = [n["id"] for n in recorded]
    assert ids == sorted(ids) and recorded[2]["inputs"] == [ids[1]] and recorded[1]["inputs"] == [-1, -1]
    assert recorded[1]["compute_bound"] and recorded[1]["flops"] == 2 * 128 ** 3
    # backward runs latest recorded first; the product's backward makes dx and dW: the step's peak
    # (A, B, the gradient through the add and tanh's, dx and dW; and the loss, 4 bytes)
    backward = [(op, live) for kind, op, live in events if kind == "backward"]
    assert [op for op, _ in backward] == ["sum", "add", "tanh", "matmul", "relu"]
    assert dict(backward)["matmul"] == 320 * KIB + 4
    assert events[-1][:2] == ("pass", "sum")


def test_a_python_tag_rule_changes_the_replays_never_the_gradients():
    x, w = inputs()
    assert not [e for e in step(x, w) if e[0] == "replayed"]
    kept = (x.grad.numpy().copy(), w.grad.numpy().copy())
    events = step(x, w, drop=("relu", "matmul", "tanh"))
    assert [n["tag"] for kind, _, n in events if kind == "recorded"] == ["recompute"] * 3 + ["keep"] * 2
    # tanh's replay writes over the product's (Note [Replays in place]); relu's comes last, as its backward
    assert [(op, in_place) for kind, op, in_place in events if kind == "replayed"] == [
        ("matmul", False), ("tanh", True), ("relu", False)]
    np.testing.assert_array_equal(x.grad.numpy(), kept[0])
    np.testing.assert_array_equal(w.grad.numpy(), kept[1])


def test_a_rule_sees_the_node_before_its_tag():
    seen = []

    def rule(node):
        seen.append(node)
        return "keep"

    x, w = inputs()
    with scheduler.RecomputeScope(rule):
        abc(x, w)
    assert [n["op"] for n in seen] == ["relu", "matmul", "tanh", "add", "sum"]
    assert seen[0]["output_shape"] == [128, 128] and seen[0]["output_bytes"] == 64 * KIB
    assert "tag" not in seen[0]


def profiled(x, w):
    with scheduler.Profiling():
        loss = abc(x, w)
        loss.backward()
        return scheduler.profile_graph(loss)


@pytest.mark.parametrize("drop,peak", [((), 320 * KIB + 4), (("relu",), 256 * KIB + 4),
                                       (("relu", "matmul", "tanh"), 256 * KIB + 4)])
def test_the_simulators_peak_and_replays_equal_a_measured_steps(drop, peak):
    x, w = inputs()
    graph = profiled(x, w)
    tags = ["recompute" if node.op in drop else "keep" for node in graph.nodes]
    predicted = scheduler.simulate(graph, tags)
    x.grad = w.grad = None
    with scheduler.peak_watch() as watch, scheduler.Profiling() as profiling:
        with scheduler.RecomputeScope(lambda node: "recompute" if node["op"] in drop else "keep"):
            loss = abc(x, w)
        loss.backward()
        del loss
        replays = profiling.replays()["nodes"]
    assert predicted["peak_bytes"] == watch.rise == peak
    assert predicted["replayed_nodes"] == replays == len(predicted["replayed"]) == len(drop)


def test_a_plan_reads_the_prices_set_by_hand():
    graph = profiled(*inputs())
    assert len(graph) == 5 and graph[-1].op == "sum"
    for node in graph.nodes:
        node.forward_ms = 0.5 if node.op == "matmul" else 0.02
        node.replay_ms = node.forward_ms
        node.replay_in_place_ms = 0
    assert [row["forward_ms"] for row in graph.rows()] == [0.02, 0.5, 0.02, 0.02, 0.02]
    keep_all = scheduler.simulate(graph, ["keep"] * 5)["peak_bytes"]
    drop_b = scheduler.simulate(graph, ["keep", "recompute", "recompute", "keep", "keep"])
    assert drop_b["recompute_ms"] == pytest.approx(0.52) and drop_b["replayed"] == [1, 2]
    plan = scheduler.make_plan(graph, policy="cost", budget=keep_all - 32 * KIB)
    assert plan.tags == ["recompute", "keep", "keep", "keep", "keep"]
    assert "replayed" in plan.reasons[0] and plan.predicted["peak_bytes"] <= keep_all - 32 * KIB
    assert plan.predicted == scheduler.simulate(graph, plan.tags)
    dot = scheduler.to_dot(graph, plan)
    assert 'n0 [label="#0 relu' in dot and "salmon" in dot.split("n1 [")[0]
    assert scheduler.make_plan(graph, policy="cost", budget="1MiB").budget == 1 << 20


def test_a_policy_written_in_python_plans_a_profile():
    graph = profiled(*inputs())
    plan = scheduler.make_plan(graph, policy=lambda rows: ["recompute" if r["op"] == "tanh" else "keep" for r in rows])
    assert plan.policy == "custom" and plan.tags == ["keep", "keep", "recompute", "keep", "keep"]


def test_bad_tags_policies_and_categories_are_errors_that_name_them():
    graph = profiled(*inputs())
    with pytest.raises(remat.Error, match="'maybe'"):
        scheduler.simulate(graph, ["keep", "maybe", "keep", "keep", "keep"])
    with pytest.raises(remat.Error, match="4 tags for a graph of 5 nodes"):
        scheduler.simulate(graph, ["keep"] * 4)
    with pytest.raises(remat.Error, match="optimal"):
        scheduler.make_plan(graph, policy="optimal")
    with pytest.raises(remat.Error, match="optimal"):
        scheduler.Checkpointer(policy="optimal")
    with pytest.raises(remat.Error, match="42"):
        scheduler.make_plan(graph, policy=42)
    with pytest.raises(remat.Error, match="weights"):
        scheduler.category("weights")
    x, w = inputs()
    with pytest.raises(remat.Error, match="'sometimes'"):
        with scheduler.RecomputeScope(lambda node: "sometimes"):
            abc(x, w)
    with pytest.raises(IndexError):  # an observer's own error reaches its caller
        with scheduler.Observer() as observer:
            observer.recorded = lambda node: [][0]
            abc(x, w)
    with pytest.raises(remat.Error, match="a dict: a list of 'keep' or 'recompute'"):
        scheduler.make_plan(graph, policy=lambda rows: {"keep": True})
    for block in (scheduler.category("parameter"), scheduler.peak_watch(), scheduler.Profiling(),
                  scheduler.RecomputeScope(lambda node: "keep")):
        with block:
            with pytest.raises(remat.Error, match="open already"):
                block.__enter__()


def test_a_policy_reads_the_rows_of_profile_rows():
    graph = profiled(*inputs())
    seen = []
    scheduler.make_plan(graph, policy=lambda rows: seen.extend(rows) or ["keep"] * len(rows))
    assert seen == graph.rows()
    assert all(row["replay_cost_ms"] >= 0 for row in seen)


def test_memory_stats_count_by_category():
    before = scheduler.memory_stats()
    with scheduler.category("parameter"):
        held = remat.zeros([256])
    after = scheduler.memory_stats()
    assert after["live"]["parameter"] - before["live"]["parameter"] == 1024
    assert after["live_transient"] == before["live_transient"]
    activation = remat.zeros([256])
    assert scheduler.memory_stats()["live_transient"] - after["live_transient"] == 1024
    del held, activation


def test_a_generator_is_drawn_from_in_turn():
    g = remat.Generator(7)
    first, second = remat.normal([4, 4], generator=g), remat.normal([4, 4], generator=g)
    assert g.offset > 0 and g.seed == 7
    np.testing.assert_array_equal(first.numpy(), remat.randn([4, 4], seed=7).numpy())
    assert not np.array_equal(first.numpy(), second.numpy())
    g.manual_seed(7)
    np.testing.assert_array_equal(remat.normal([4, 4], generator=g).numpy(), first.numpy())
    labels = remat.randint(10, [100], generator=remat.Generator(1)).numpy()
    np.testing.assert_array_equal(labels, remat.randint(10, [100], seed=1).numpy())


def planned_step(model, x, labels, **options):
    checkpointer = scheduler.Checkpointer(**options)

    def one_step():
        with checkpointer.record():
            loss = remat.cross_entropy(model(x), labels)
        loss.backward()

    checkpointer.rehearse(one_step)
    one_step()
    return checkpointer


def test_a_checkpointer_plans_from_a_rehearsal_and_holds_its_budget():
    g = remat.Generator(11)
    with scheduler.category("data"):
        x = remat.normal([1024, 64], generator=g)
        labels = remat.randint(10, [1024], generator=g)
    model = remat.nn.MLP([64, 256, 256, 256, 256, 10], seed=11)
    keep = planned_step(model, x, labels, policy="none").report()
    assert keep["predicted_peak_bytes"] == keep["peak_activation_bytes"] and keep["replayed_nodes"] == 0
    budget = (keep["minimum_budget_bytes"] + keep["peak_activation_bytes"]) // 2
    checkpointer = planned_step(model, x, labels, policy="cost", budget=budget)
    report = checkpointer.report()
    assert not report["profiling"] and report["budget_bytes"] == budget
    assert report["peak_activation_bytes"] == report["predicted_peak_bytes"] <= budget
    assert report["replayed_nodes"] == checkpointer.plan.tags.count("recompute") > 0
    assert len(checkpointer.profile) == len(checkpointer.plan.tags)
    with pytest.raises(remat.Error, match="budget"):
        planned_step(model, x, labels, policy="cost", budget=keep["minimum_budget_bytes"] // 2)
    rehearsed = scheduler.Checkpointer(policy="cost", budget=budget)

    def from_numpy_inside():  # remat.tensor copies nothing on the meta device, where the rehearsal runs
        with rehearsed.record():
            loss = remat.cross_entropy(model(remat.tensor(np.ones((4, 64), np.float32))), remat.tensor(np.zeros(4, np.int64)))
        loss.backward()
    rehearsed.rehearse(from_numpy_inside)


def test_a_models_profile_and_plan():
    ids, targets = remat.randint(32, [4, 16], seed=1), remat.randint(32, [4, 16], seed=2)
    model = remat.nn.GPT(vocab_size=32, block_size=16, n_layer=2, n_head=2, n_embd=32, dropout=0.1, seed=4)
    model.gradient_checkpointing_enable(policy="blocks")
    assert scheduler.checkpointing_plan(model) is None
    for _ in range(2):
        model(ids, targets)[1].backward()
    graph, plan = scheduler.checkpointing_profile(model), scheduler.checkpointing_plan(model)
    assert plan.policy == "blocks" and len(plan.tags) == len(graph)
    tags = scheduler.effective_tags(graph, plan.tags)
    assert set(tags) == {"keep", "recompute"} and tags.count("recompute") >= plan.tags.count("recompute")
    assert {node.block for node in graph.nodes} >= {"transformer.h.0", "transformer.h.1"}
    assert scheduler.Profile.from_json(graph.to_json()).signature == graph.signature


def test_node_names_are_the_command_lines_and_a_plan_that_changes_nothing_warns():
    ids, targets = remat.randint(32, [4, 16], seed=1), remat.randint(32, [4, 16], seed=2)
    model = remat.nn.GPT(vocab_size=32, block_size=16, n_layer=2, n_head=2, n_embd=32, tie_weights=False, seed=4,
                         attention="explicit", mlp="explicit")
    model.gradient_checkpointing_enable(policy="every-n-blocks:2", prefer_keep=["h.*.mlp/gelu"])
    for _ in range(2):
        model(ids, targets)[1].backward()
    graph = scheduler.checkpointing_profile(model)
    names = [node.name for node in graph.nodes]
    assert "transformer.h.1.attn/causal_softmax" in names and names[-1] == "/cross_entropy"
    assert [row["name"] for row in graph.rows()] == names
    program = os.environ.get("REMAT_PROGRAM")  # ctest gives the C++ program: the same names from C++
    if program:
        out = subprocess.run([program, "explain", "--model", "gpt", "--n-layer", "2", "--n-head", "2", "--n-embd",
                              "32", "--block-size", "16", "--vocab-size", "32", "--batch-size", "4", "--head",
                              "untied", "--attention", "explicit", "--mlp", "explicit", "--format", "json"],
                             capture_output=True, text=True, check=True)
        assert [json.loads(line)["name"] for line in out.stdout.splitlines()[1:]] == names
    with pytest.warns(UserWarning, match="policy chain drops none"):
        scheduler.make_plan(graph, policy="chain")
    with pytest.raises(remat.Error, match="nearest"):
        scheduler.make_plan(graph, must_recompute=["h.*.atn/*"])
    with pytest.raises(remat.Error, match="'atn' names no module"):
        scheduler.make_plan(graph, policy="recompute-modules:atn")
    plan = scheduler.checkpointing_plan(model)
    gelu = names.index("transformer.h.0.mlp/gelu")
    assert plan.tags[gelu] == "keep" and "prefer-keep" in plan.reasons[gelu]


def test_a_plan_warning_taken_as_an_error_leaves_the_model_trainable():
    ids, targets = remat.randint(32, [4, 16], seed=1), remat.randint(32, [4, 16], seed=2)
    model = remat.nn.GPT(vocab_size=32, block_size=16, n_layer=1, n_head=2, n_embd=16, seed=4)
    model.gradient_checkpointing_enable(policy="chain")  # no budget: keeps everything, and says so
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="policy chain drops none"):
            for _ in range(3):
                model(ids, targets)[1].backward()
        for _ in range(3):  # the plan was made and kept: told once, the steps go on
            model(ids, targets)[1].backward()
    assert scheduler.checkpointing_plan(model).policy == "chain"


def test_closing_a_scope_under_one_opened_inside_it_is_an_error_until_the_inner_one_closes():
    outer = scheduler.Profiling()
    inner = scheduler.RecomputeScope(lambda node: "keep")
    outer.__enter__()
    inner.__enter__()
    with pytest.raises(remat.Error, match="Profiling: closed while 1 recording scope"):
        outer.__exit__(None, None, None)
    inner.__exit__(None, None, None)
    outer.__exit__(None, None, None)
    x = remat.tensor(np.ones(3, dtype=np.float32), requires_grad=True)
    remat.relu(x).sum().backward()  # the thread's context is whole again
    assert np.array_equal(x.grad.numpy(), np.ones(3, dtype=np.float32))
