#!/usr/bin/env python3
"""The guided tour of autograd internals (docs/tour.md) from Python: the
twin of examples/tour.cpp, line for line. The course's own example first
(A and B, then C = A + B: keep them or drop them?), then a two-layer MLP,
then one GPT block with dropout. The same engine computes every number, so
it prints exactly the C++ program's lines, and tests/examples/check_tour.py
holds both to the doc. Byte counts are the allocator's; nothing printed
depends on the clock (the cost model's prices are set by hand in part 3,
and parts 4 and 5 plan from shapes and bytes alone).

    PYTHONPATH=build/python build-py/bin/python examples/tour.py [DIR]   (DIR: where to write the DOT of part 3)
"""
import os
import sys

import numpy as np

import remat
from remat import scheduler


def kib(nbytes):
    return f"{nbytes // 1024} KiB"


def live():
    """Activation and temporary bytes alive now: what checkpointing saves."""
    return scheduler.memory_stats()["live_transient"]


class Narrator(scheduler.Observer):
    """Tells what the engine does, as it does it: each node recorded (what its
    backward will read), replayed and run backward, with the live bytes after.
    Nodes are named in the order they are recorded."""

    def __init__(self, names):
        self.names = names
        self.labels = {}  # node id -> name

    def label(self, node):
        return self.labels.get(node["id"], node["op"])

    def recorded(self, node):
        self.labels[node["id"]] = self.names[len(self.labels)]
        saves = ", ".join("its output" if s == "output" else "a side result" if s == "side result" else f"input {s}"
                          for s in node["saved"])
        reads = f"(backward reads {saves})" if saves else "(backward reads nothing)"
        tag = "keep" if node["tag"] == "keep" else "drop"
        print(f"  forward  {self.label(node):<16} {kib(node['output_bytes']):<9} {tag} {reads}; live {kib(live())}")

    def replayed(self, node, in_place):
        print(f"    replay {self.label(node)}{', over its input' if in_place else ''}: live {kib(live())}")

    def backward_finished(self, node):
        print(f"  backward {self.label(node):<16} live {kib(live())}")


def make_inputs():
    """x (128, 128) and W (128, 128), made once: a layer's input that wants its
    gradient, and a weight (counted as parameters, not as activations)."""
    g = remat.Generator(7)
    with scheduler.category("parameter"):
        x = remat.normal([128, 128], 0, 1, generator=g).requires_grad_()
        w = remat.normal([128, 128], 0, 0.1, generator=g).requires_grad_()
    return x, w


def abc(x, w):
    """The course's example: A = relu(x), B = tanh(x @ W), C = A + B, loss = sum(C)."""
    a = remat.relu(x)
    b = remat.tanh(x @ w)
    c = a + b
    return c.sum()


ABC_NAMES = ["A = relu(x)", "x @ W", "B = tanh(x @ W)", "C = A + B", "loss = sum(C)"]


def narrate(x, w, drop):
    """One step of abc, narrated; `drop` tags those ops Recompute."""
    x.grad = None
    w.grad = None
    with Narrator(ABC_NAMES), scheduler.RecomputeScope(lambda node: "recompute" if node["op"] in drop else "keep"):
        loss = abc(x, w)
    print(f"  forward done: live {kib(live())}")
    loss.backward()
    print(f"  backward done: live {kib(live())}")


def part1(x, w):
    print("== 1. keep everything")
    narrate(x, w, [])


def part2(x, w):
    print("== 2. drop A and B")
    narrate(x, w, ["relu", "matmul", "tanh"])


def part3(x, w, dot_dir):
    """The cost model: the graph profiled, its prices set by hand (measured
    times move from run to run; these keep the page the same everywhere),
    then planned under a budget that one of A and B must go for."""
    print("== 3. the cost model decides")
    with scheduler.Profiling():
        loss = abc(x, w)
        loss.backward()
        graph = scheduler.profile_graph(loss)
    for node in graph.nodes:
        # A GEMM's price: 0.5 ms; an elementwise op or a sum: 0.02 ms.
        node.forward_ms = 0.5 if node.op == "matmul" else 0.02
        node.replay_ms = node.forward_ms
        node.replay_in_place_ms = 0
    keep_all = ["keep"] * len(graph)
    keep_all_peak = scheduler.simulate(graph, keep_all)["peak_bytes"]
    budget = keep_all_peak - 32 * 1024
    plan = scheduler.make_plan(graph, policy="cost", budget=budget)
    print(f"  keep-all peak {kib(keep_all_peak)}; budget {kib(budget)}")
    # What each choice costs: drop A alone, or B alone (x @ W, which only
    # B's replay would read, goes with it).
    for what, ops in [("drop A", ["relu"]), ("drop B", ["matmul", "tanh"])]:
        tags = ["recompute" if node.op in ops else "keep" for node in graph.nodes]
        sim = scheduler.simulate(graph, tags)
        print(f"  {what}: peak {kib(sim['peak_bytes'])}, {sim['replayed_nodes']} replay(s), "
              f"{sim['recompute_ms']:.2f} ms of replays")
    print("  cost's plan:")
    for node in graph.nodes:
        v = node.position
        print(f"  {ABC_NAMES[v]:<16} {kib(node.output_bytes):<7} {plan.tags[v].upper():<9} {plan.reasons[v]}")
    if dot_dir:
        with open(os.path.join(dot_dir, "abc_cost.dot"), "w") as dot:
            dot.write(scheduler.to_dot(graph, plan))


def planned_step(loss, **options):
    """One step of `loss` under `options`, its graph planned first from a
    rehearsal on the meta device: a plan made from shapes and bytes alone
    (nominal prices), the same on every machine."""
    checkpointer = scheduler.Checkpointer(**options)

    def step():
        with checkpointer.record():
            l = loss()
        l.backward()

    checkpointer.rehearse(step)
    step()
    return checkpointer.report()


def mlp(sizes):
    """An MLP of `sizes` on a batch of 1024 rows: keep-all's peak, the least
    budget any plan meets, and cost's plan halfway between the two."""
    g = remat.Generator(11)
    with scheduler.category("data"):
        x = remat.normal([1024, sizes[0]], 0, 1, generator=g)
        labels = remat.randint(sizes[-1], [1024], generator=g)
    model = remat.nn.MLP(sizes, seed=11)  # (its weights are not the C++ tour's: no figure below reads them)

    def loss():
        return remat.cross_entropy(model(x), labels)

    keep = planned_step(loss, policy="none")
    probe = planned_step(loss, policy="cost", budget=2 * keep["peak_activation_bytes"])
    print(f"  {len(sizes) - 1} linear layers: keep all peaks at {kib(keep['peak_activation_bytes'])} "
          f"(predicted {kib(keep['predicted_peak_bytes'])}); the least budget a plan meets: "
          f"{kib(probe['minimum_budget_bytes'])}")
    if probe["minimum_budget_bytes"] >= keep["peak_activation_bytes"]:
        return
    budget = (probe["minimum_budget_bytes"] + keep["peak_activation_bytes"]) // 2
    cost = planned_step(loss, policy="cost", budget=budget)
    print(f"  cost within {kib(budget)}: kept {kib(cost['kept_bytes'])}, dropped {kib(cost['dropped_bytes'])}, "
          f"peak {kib(cost['peak_activation_bytes'])} (predicted {kib(cost['predicted_peak_bytes'])}), "
          f"{cost['replayed_nodes']} replays")


def part4():
    print("== 4. a two-layer MLP, then a deeper one")
    mlp([64, 256, 10])
    mlp([64, 256, 256, 256, 256, 10])


def gradients(model):
    """Every parameter's gradient, in order."""
    return [p.grad.numpy() for _, p in model.named_parameters()]


def part5():
    print("== 5. one GPT block with dropout")
    g = remat.Generator(5)
    with scheduler.category("data"):
        ids = remat.randint(64, [8, 32], generator=g)
        targets = remat.randint(64, [8, 32], generator=g)
    config = dict(vocab_size=64, block_size=32, n_layer=1, n_head=2, n_embd=64, dropout=0.1, seed=3)
    kept, replayed = remat.nn.GPT(**config), remat.nn.GPT(**config)  # the same weights, the same dropout stream
    replayed.gradient_checkpointing_enable(policy="blocks")
    # Two steps each: the first profiles the graph (under blocks), the
    # second runs under its plan; gradients are compared after the second.
    for model in (kept, replayed):
        for _ in range(2):
            for p in model.parameters():
                p.grad = None
            logits, loss = model(ids, targets)  # the logits held through backward, as the C++ holds them
            loss.backward()
            del logits, loss
    # The dropouts the plan drops: their masks are drawn again when replayed.
    graph = scheduler.checkpointing_profile(replayed)
    tags = scheduler.effective_tags(graph, scheduler.checkpointing_plan(replayed).tags)
    dropouts = [node.position for node in graph.nodes if node.op == "dropout"]
    dropped = sum(tags[v] == "recompute" for v in dropouts)
    print(f"  blocks: {replayed.checkpointing_report()['replayed_nodes']} replays; "
          f"the plan drops {dropped} of the {len(dropouts)} dropouts")
    same = all(np.array_equal(a, b) for a, b in zip(gradients(kept), gradients(replayed)))
    print(f"  every gradient bit-identical to keeping everything: {'yes' if same else 'NO'}")


def main():
    dot_dir = sys.argv[1] if len(sys.argv) > 1 else ""
    x, w = make_inputs()
    part1(x, w)
    part2(x, w)
    part3(x, w, dot_dir)
    part4()
    part5()


if __name__ == "__main__":
    main()
