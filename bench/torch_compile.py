"""torch.compile's side of the workloads: the compiled step and what its partitioner chose.

Used by bench/torch_reference.py (--policy compile --memory-budget F). Run
alone, it steps eager and torch.compile at each budget in turn in one
process (`paired`, a check of the time ratios on a loaded machine):
  VENV/bin/python bench/torch_compile.py [--budgets 1.0,0.5,0.25] [--rounds 12]
`require_compile` stops with a message naming the installed torch
when it has no torch.compile (PyTorch 1.x, Debian's 1.13) or no
activation_memory_budget. `compiled_loss` compiles the forward and the loss
as one graph (inductor, the default backend); the budget is
torch._functorch.config.activation_memory_budget, read when the first call
compiles. `PartitionLog` watches inductor's call of the min-cut partitioner
and summarises each forward/backward split: what backward reads from
forward, and which forward ops backward runs again.
"""

import collections

# Ops that move no data (views, shape changes, tuple access): not counted as replayed work.
VIEW_OPS = {"view", "_unsafe_view", "reshape", "permute", "expand", "t", "transpose", "unsqueeze",
            "squeeze", "alias", "slice", "select", "getitem", "detach"}
MATMUL_OPS = {"mm", "bmm", "addmm"}


def require_compile(torch, budget):
    """Exits with a message unless this torch has torch.compile and activation_memory_budget."""
    major = int(torch.__version__.split(".")[0])
    if major < 2 or not hasattr(torch, "compile"):
        raise SystemExit("torch_reference: --policy compile needs PyTorch 2.x (torch.compile); this Python "
                         "has torch %s. Run it with a Python whose torch is 2.x, e.g. a virtual "
                         "environment with `pip install torch`." % torch.__version__)
    from torch._functorch import config as functorch_config
    if budget != 1.0 and not hasattr(functorch_config, "activation_memory_budget"):
        raise SystemExit("torch_reference: torch %s has no torch._functorch.config.activation_memory_budget "
                         "(--memory-budget %g needs PyTorch 2.4 or newer)" % (torch.__version__, budget))


def compiled_loss(torch, model, loss_fn, budget, fresh=False):
    """loss_fn(model(inputs), targets) under torch.compile, planned at activation_memory_budget = budget;
    fresh: through a function of its own (own_code), for a process that compiles several copies."""
    require_compile(torch, budget)
    from torch._functorch import config as functorch_config
    if hasattr(functorch_config, "activation_memory_budget"):
        functorch_config.activation_memory_budget = budget
    if fresh:
        return torch.compile(own_code(loss_fn, model, budget))
    return torch.compile(lambda inputs, targets: loss_fn(model(inputs), targets))


def op_name(node):
    """'mm' for aten.mm.default, 'getitem' for operator.getitem."""
    target = node.target
    name = getattr(target, "__name__", str(target))
    return name.split(".")[0]


def tensor_bytes(node):
    value = node.meta.get("val")
    return value.numel() * value.element_size() if hasattr(value, "element_size") else 0


def matmul_flops(node):
    """2 m n k (times the batch) of an mm, bmm or addmm node, from its output and first operand's shapes."""
    out = node.meta.get("val")
    operand = node.args[1] if op_name(node) == "addmm" else node.args[0]
    inner = operand.meta["val"].shape[-1]
    return 2 * out.numel() * inner


def summarise(forward, backward):
    """What backward reads from forward and which forward ops it runs again (the partitioner keeps
    node names, so a backward node named as a forward one is that op replayed)."""
    forward_names = {node.name for node in forward.graph.nodes if node.op == "call_function"}
    replayed = [node for node in backward.graph.nodes
                if node.op == "call_function" and node.name in forward_names]
    work = [node for node in replayed if op_name(node) not in VIEW_OPS]
    saved = [node for node in backward.graph.nodes if node.op == "placeholder"
             and not node.name.startswith(("primals", "tangents"))]
    matmuls = [node for node in work if op_name(node) in MATMUL_OPS]
    return {
        "forward_ops": sum(1 for node in forward.graph.nodes
                           if node.op == "call_function" and op_name(node) not in VIEW_OPS),
        "saved_values": len(saved),
        "saved_bytes": sum(tensor_bytes(node) for node in saved),
        "replayed_ops": len(work),
        "replayed_by_op": dict(collections.Counter(op_name(node) for node in work).most_common()),
        "replayed_matmuls": len(matmuls),
        "replayed_matmul_flops": sum(matmul_flops(node) for node in matmuls),
    }


class PartitionLog:
    """Records a summary of every forward/backward split inductor makes while installed.

    Inductor's caches are turned off, since a cache hit skips the partitioner (the graphs it
    compiles are the same either way)."""

    def __init__(self, torch):
        import torch._inductor.compile_fx as compile_fx
        from torch._functorch import config as functorch_config

        self.partitions = []
        torch._inductor.config.fx_graph_cache = False
        if hasattr(functorch_config, "enable_autograd_cache"):
            functorch_config.enable_autograd_cache = False
        partition = compile_fx.min_cut_rematerialization_partition

        def recording(*args, **kwargs):
            forward, backward = partition(*args, **kwargs)
            self.partitions.append(summarise(forward, backward))
            return forward, backward

        compile_fx.min_cut_rematerialization_partition = recording


def own_code(loss_fn, model, budget):
    """loss_fn(model(inputs), targets) as a function with a code object of its own.

    Dynamo keeps compiled graphs per code object and guards on shapes, not on which module's
    parameters come in: a second copy of W2 through the same function would run the graph compiled
    for the first, under the first's budget. A distinct code object compiles afresh."""
    source = "def loss(inputs, targets):\n    return loss_fn(model(inputs), targets)\n"
    scope = {"loss_fn": loss_fn, "model": model}
    exec(compile(source, "<W2 loss, budget %g, copy %d>" % (budget, id(model)), "exec"), scope)
    return scope["loss"]


def paired(argv=None):
    """Eager and torch.compile at each budget in one process, stepped in turn: per-step time ratios.

    Each configuration trains its own copy of W2 (same seed); one round steps every copy once, in
    order, so that a loaded machine's drift falls on all of them within seconds. Prints, per
    configuration, the median step ms and the median over rounds of its step over eager's."""
    import argparse
    import json
    import os
    import statistics
    import sys
    import time

    parser = argparse.ArgumentParser(description=paired.__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="1.0,0.5,0.25")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_reference

    torch.set_num_threads(args.threads)
    require_compile(torch, 0.5)
    torch._dynamo.config.cache_size_limit = 64  # one compiled graph per copy
    steps = {}
    counters = torch._dynamo.utils.counters["stats"]
    for budget in [None] + [float(b) for b in args.budgets.split(",")]:
        model, inputs, targets, loss_fn = torch_reference.build_w2(torch, 0)
        if budget is None:
            loss_of = lambda i, t, m=model, f=loss_fn: f(m(i), t)  # noqa: E731
        else:
            loss_of = compiled_loss(torch, model, loss_fn, budget, fresh=True)
        graphs = counters["unique_graphs"]
        runner = torch_reference.Runner(torch, model, loss_of, inputs, targets)
        for _ in range(3):
            runner.step()  # compiles now, under this budget
        if budget is not None and counters["unique_graphs"] == graphs:
            raise SystemExit("torch_compile: the copy at budget %g compiled nothing of its own" % budget)
        steps["eager" if budget is None else "compile %g" % budget] = runner
    graphs = counters["unique_graphs"]
    times = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, runner in steps.items():
            start = time.perf_counter()
            runner.step()
            times[name].append((time.perf_counter() - start) * 1e3)
    if counters["unique_graphs"] != graphs:
        raise SystemExit("torch_compile: a copy compiled again during the timed rounds (%d graphs, then %d): "
                         "its budget is no longer the one it was set up under" % (graphs, counters["unique_graphs"]))
    for name in steps:
        ratios = [a / b for a, b in zip(times[name], times["eager"])]
        print(json.dumps({"config": name, "rounds": args.rounds, "step_ms_median": statistics.median(times[name]),
                          "step_ms_min": min(times[name]), "x_eager_paired": statistics.median(ratios)}))


if __name__ == "__main__":
    paired()
