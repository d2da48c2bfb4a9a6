#!/usr/bin/python3
"""PyTorch reference for the workloads of docs/workloads.md (W1 and W2).

Runs one workload in PyTorch on the CPU and prints one JSON line with the
fields `remat bench` prints, so both engines can be compared side by side on
the same machine, BLAS and thread count. Not part of the build; needs Debian's
/usr/bin/python3 with python3-torch (plain `python3` may not see it).

  /usr/bin/python3 bench/torch_reference.py --workload W1 --threads 1 [--steps 10]
  /usr/bin/python3 bench/torch_reference.py --workload W2 --policy blocks --steps 3

Checkpointing policies (--policy; "none", keep-all, is the default), for the
PyTorch points of `remat tradeoff` (bench/tradeoff.sh):
  blocks       W2: torch.utils.checkpoint around each transformer block.
  every2       W2: one checkpoint around each pair of blocks (3 segments).
  sequential4  W1: the 31 layers in 4 segments as checkpoint_sequential cuts
               them (7 layers each, the last segment of 10 not checkpointed).
Checkpoints are non-reentrant (use_reentrant=False) where the installed torch
accepts it (1.13 does). checkpoint_sequential itself is written out here
because 1.13's only runs the reentrant variant, under which the first
segment (whose input needs no gradient) would give its parameters none.
A checkpoint keeps its input for backward outside saved-tensor hooks, so
`saved_bytes_after_forward` adds each checkpointed segment's input (unique
storages, as for everything else).
  compile      W1, W2: torch.compile (inductor) of the forward and the loss as
               one graph, with torch._functorch.config.activation_memory_budget
               = --memory-budget (1.0, its default, unless given); needs
               PyTorch 2.x (bench/torch_compile.py). Its first steps compile:
               the warm-ups take them, and `first_step_ms` says how long the
               first took. The memory child also reports `partitions`: per
               forward/backward split, the values backward reads and the
               forward ops it runs again (bench/torch_compile.py).

Sequence of steps (a step is zero_grad + forward + backward + optimizer step):
  1. 3 warm-up steps; the first step's loss is `loss_first`.
  Steps 2 and 3 run in a child process of their own (after its own warm-up),
  because the malloc settings they need would slow the timed steps down:
  2. 1 step under torch.autograd.graph.saved_tensors_hooks:
     `saved_bytes_after_forward` is the bytes of the unique storages packed
     for backward during the forward pass (deduplicated by storage
     data_ptr), parameters excluded -- the figure of docs/workloads.md.
     Under compile the hooks see what the compiled graph saves for backward.
  3. 3 steps with a background thread sampling the resident set size
     (/proc/self/statm) every 0.5 ms: `peak_activation_bytes` is the largest
     rise of RSS above its level just before a step, over those steps.
     For RSS to follow the live bytes, glibc malloc is told before torch
     loads to serve every block of 64 KiB or more with its own mmap, unmapped
     when freed (M_MMAP_THRESHOLD, which also stops glibc raising that
     threshold), and to trim the heap top at once (M_TRIM_THRESHOLD 0).
     Parameters and their gradients exist before the step, so the rise is
     activations, activation gradients and temporaries; SGD without momentum
     has no state. A sample can miss a spike shorter than 0.5 ms, so this is
     a lower bound; "peak_method" names the method.
  4. --steps timed steps (wall clock, perf_counter), with glibc's malloc as
     PyTorch users have it; `loss_last` is the last. --timing-only skips
     steps 2 and 3 (their fields are null), for repeated rounds.
Random data, drawn once from the fixed seed and used for every step. W1:
inputs N(0, 1) and labels uniform in 0..9, PyTorch's default initialisation.
W2: token ids and targets uniform in 0..255, the GPT of bench/torch_gpt.py
with its own initialisation (weights N(0, 0.02), biases 0).

New workloads: add a builder to WORKLOADS returning (model, inputs, targets,
loss_fn); everything else is shared.
"""

import argparse
import ctypes
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
MMAP_THRESHOLD_BYTES = 64 * 1024
SAMPLE_SECONDS = 0.0005
WARMUP_STEPS = 3
PEAK_STEPS = 3


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", default="W1", choices=sorted(WORKLOAD_NAMES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=10, help="timed steps after %d warm-ups" % WARMUP_STEPS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--attention", default="matmul", choices=["matmul", "sdpa"],
                        help="W2's attention: separate ops (as remat) or F.scaled_dot_product_attention")
    parser.add_argument("--policy", default="none", choices=sorted(POLICIES),
                        help="checkpointing: none (default), blocks or every2 (W2), sequential4 (W1)")
    parser.add_argument("--memory-budget", type=float, default=None,
                        help="--policy compile: torch._functorch.config.activation_memory_budget, in (0, 1] "
                             "(1.0, the default, is inductor's own partition)")
    parser.add_argument("--timing-only", action="store_true",
                        help="time the steps only (no memory child: its fields are null)")
    parser.add_argument("--memory-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.workload not in POLICIES[args.policy]:
        parser.error("--policy %s is for workload %s, not %s"
                     % (args.policy, " or ".join(POLICIES[args.policy]), args.workload))
    if args.memory_budget is not None and args.policy != "compile":
        parser.error("--memory-budget is for --policy compile, not %s" % args.policy)
    if args.memory_budget is None:
        args.memory_budget = 1.0
    if not 0.0 < args.memory_budget <= 1.0:
        parser.error("--memory-budget must be in (0, 1], got %g" % args.memory_budget)
    return args


def configure_malloc():
    """Makes freed memory leave the process at once (see the header)."""
    libc = ctypes.CDLL("libc.so.6")
    m_trim_threshold, m_mmap_threshold = -1, -3  # from <malloc.h>
    ok = libc.mallopt(m_mmap_threshold, MMAP_THRESHOLD_BYTES) == 1
    ok = libc.mallopt(m_trim_threshold, 0) == 1 and ok
    return ok


def loaded_libraries(substring):
    """Paths of the shared libraries mapped into this process whose name holds substring."""
    paths = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and substring in os.path.basename(fields[-1]) and fields[-1] not in paths:
                paths.append(fields[-1])
    return paths


def set_openblas_threads(threads):
    """torch.set_num_threads does not reach OpenBLAS's own pool; this does."""
    for path in loaded_libraries("openblas"):
        lib = ctypes.CDLL(path)
        if hasattr(lib, "openblas_set_num_threads"):
            lib.openblas_set_num_threads(threads)


def storage_of(tensor):
    """The tensor's storage as bytes (torch >= 2.0 names it untyped_storage)."""
    return tensor.untyped_storage() if hasattr(tensor, "untyped_storage") else tensor.storage()


def resident_bytes(fd):
    return int(os.pread(fd, 128, 0).split()[1]) * PAGE_BYTES


def import_torch():
    """torch, or an exit naming this Python when it has none."""
    try:
        import torch
    except ImportError:
        raise SystemExit("torch_reference: %s has no torch (import torch failed); run it with a Python "
                         "that has PyTorch" % sys.executable)
    return torch


# --- workloads ---------------------------------------------------------------

def build_w1(torch, seed, attention="matmul"):
    """15 x [Linear(1024,1024) + ReLU] + Linear(1024,10); batch 256; cross-entropy (no attention: the
    argument is taken for a signature shared with build_w2)."""
    torch.manual_seed(seed)
    layers = []
    for _ in range(15):
        layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(1024, 10))
    model = torch.nn.Sequential(*layers)
    inputs = torch.randn(256, 1024)
    targets = torch.randint(0, 10, (256,))
    return model, inputs, targets, torch.nn.functional.cross_entropy


def build_w2(torch, seed, attention="matmul"):
    """GPT-mini: vocab 256, context 128, 6 blocks, d_model 256, 4 heads, untied head; batch 16."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_gpt

    torch.manual_seed(seed)
    config = torch_gpt.GPTConfig(vocab_size=256, block_size=128, n_layer=6, n_head=4, n_embd=256,
                                 dropout=0.0, tie_weights=False, dtype="float32", attention=attention)
    model = torch_gpt.GPT(config)
    inputs = torch.randint(0, config.vocab_size, (16, config.block_size))
    targets = torch.randint(0, config.vocab_size, (16, config.block_size))
    # The model returns (logits, None) without targets; the loss is taken outside,
    # as the Runner does for every workload.
    return model, inputs, targets, lambda output, labels: torch_gpt.lm_loss(output[0], labels)


WORKLOADS = {"W1": build_w1, "W2": build_w2}
WORKLOAD_NAMES = list(WORKLOADS)


# --- checkpointing policies --------------------------------------------------

# Policy -> the workloads it applies to.
POLICIES = {"none": ("W1", "W2"), "blocks": ("W2",), "every2": ("W2",), "sequential4": ("W1",),
            "compile": ("W1", "W2")}
# Called with each checkpointed segment's input while saved bytes are counted.
checkpoint_input_hook = None


def checkpoint_kwargs():
    """use_reentrant=False where this torch's checkpoint takes it."""
    import inspect

    from torch.utils.checkpoint import checkpoint
    return {"use_reentrant": False} if "use_reentrant" in inspect.signature(checkpoint).parameters else {}


def checkpointed(function, x):
    """function(x) under torch.utils.checkpoint: its activations are rebuilt in backward."""
    from torch.utils.checkpoint import checkpoint
    if checkpoint_input_hook is not None:
        checkpoint_input_hook(x)
    return checkpoint(function, x, **checkpoint_kwargs())


def apply_policy(torch, policy, model):
    """The model with the policy's checkpoints: the same parameters, same values, same order."""
    if policy in ("none", "compile"):
        return model

    class Checkpointed(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return checkpointed(self.inner, x)

    class SequentialCheckpoint(torch.nn.Module):
        """checkpoint_sequential(layers, segments, x), non-reentrant (see the header)."""

        def __init__(self, layers, segments):
            super().__init__()
            self.layers, self.segments = layers, segments

        def forward(self, x):
            functions = list(self.layers.children())
            size = len(functions) // self.segments
            for start in range(0, size * (self.segments - 1), size):
                x = checkpointed(torch.nn.Sequential(*functions[start:start + size]), x)
            return torch.nn.Sequential(*functions[size * (self.segments - 1):])(x)

    if policy == "sequential4":
        return SequentialCheckpoint(model, 4)
    blocks = list(model.transformer.h)
    group = {"blocks": 1, "every2": 2}[policy]
    model.transformer.h = torch.nn.ModuleList(
        Checkpointed(torch.nn.Sequential(*blocks[i:i + group])) for i in range(0, len(blocks), group))
    return model


def build(torch, args):
    """A Runner of the workload's model under args.policy, on its batch."""
    model, inputs, targets, loss_fn = WORKLOADS[args.workload](torch, args.seed, args.attention)
    model = apply_policy(torch, args.policy, model)
    if args.policy == "compile":
        import torch_compile
        loss_of = torch_compile.compiled_loss(torch, model, loss_fn, args.memory_budget)
    else:
        loss_of = lambda batch, labels: loss_fn(model(batch), labels)  # noqa: E731
    return Runner(torch, model, loss_of, inputs, targets)


# --- measurement -------------------------------------------------------------

class Runner:
    def __init__(self, torch, model, loss_of, inputs, targets):
        self.torch = torch
        self.model, self.loss_of, self.inputs, self.targets = model, loss_of, inputs, targets
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(self):
        # Gradients stay allocated (zeroed), as docs/workloads.md counts them: they
        # exist before the step. PyTorch 2.x's default (set_to_none) frees and
        # reallocates them inside the step, which moves the RSS rise.
        self.optimizer.zero_grad(set_to_none=False)
        loss = self.loss_of(self.inputs, self.targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def saved_bytes_after_forward(self):
        """Runs one step; returns bytes of unique non-parameter storages saved in its forward."""
        torch = self.torch
        parameter_storages = {storage_of(p).data_ptr() for p in self.model.parameters()}
        saved = {}  # storage data_ptr -> nbytes

        def pack(tensor):
            storage = storage_of(tensor)
            if storage.data_ptr() not in parameter_storages:
                saved[storage.data_ptr()] = storage.nbytes()
            return tensor

        global checkpoint_input_hook
        self.optimizer.zero_grad(set_to_none=False)
        checkpoint_input_hook = pack  # a checkpoint's input is kept outside the hooks
        try:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
                loss = self.loss_of(self.inputs, self.targets)
        finally:
            checkpoint_input_hook = None
        after_forward = sum(saved.values())
        loss.backward()
        self.optimizer.step()
        return after_forward

    def peak_rss_rise(self, steps):
        """Largest RSS rise above the pre-step level over `steps` steps (see the header)."""
        fd = os.open("/proc/self/statm", os.O_RDONLY)
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(SAMPLE_SECONDS / 5)  # let the sampler in between Python-level ops
        try:
            rise = 0
            for _ in range(steps):
                before = resident_bytes(fd)
                high = [before]
                done = threading.Event()

                def sample():
                    while not done.is_set():
                        high[0] = max(high[0], resident_bytes(fd))
                        time.sleep(SAMPLE_SECONDS)

                sampler = threading.Thread(target=sample)
                sampler.start()
                self.step()
                high[0] = max(high[0], resident_bytes(fd))
                done.set()
                sampler.join()
                rise = max(rise, high[0] - before)
            return rise
        finally:
            sys.setswitchinterval(switch_interval)
            os.close(fd)


def main():
    args = parse_args()
    # Thread settings must be in place before torch (and OpenBLAS) start.
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[variable] = str(args.threads)
    if args.memory_only:
        print(json.dumps(measure_memory(args)))
        return
    memory = {"saved_bytes_after_forward": None, "peak_activation_bytes": None, "peak_method": None}
    if not args.timing_only:
        memory = memory_in_a_child(args)

    torch = import_torch()
    torch.set_num_threads(args.threads)
    runner = build(torch, args)
    start = time.perf_counter()
    losses = [runner.step()]
    first_step_ms = (time.perf_counter() - start) * 1e3
    losses += [runner.step() for _ in range(WARMUP_STEPS - 1)]
    set_openblas_threads(args.threads)  # OpenBLAS is mapped once the first GEMM has run

    times_ms = []
    for _ in range(args.steps):
        start = time.perf_counter()
        losses.append(runner.step())
        times_ms.append((time.perf_counter() - start) * 1e3)
    record = describe(torch, args, runner, times_ms, losses, memory)
    record["first_step_ms"] = round(first_step_ms, 3)
    print(json.dumps(record))


def memory_in_a_child(args):
    """Memory is measured in a child process whose malloc returns every large
    block at once (so that RSS follows the live bytes); timing runs here
    with malloc as PyTorch users have it, so the mallopt settings do not
    slow the timed steps down."""
    command = [sys.executable, os.path.abspath(__file__), "--workload", args.workload,
               "--threads", str(args.threads), "--seed", str(args.seed), "--policy", args.policy,
               "--attention", args.attention, "--memory-only"]
    if args.policy == "compile":
        command += ["--memory-budget", repr(args.memory_budget)]
    child = subprocess.run(command, capture_output=True, text=True)
    if child.returncode != 0:
        sys.stderr.write(child.stderr)
        raise SystemExit("torch_reference: the memory child failed (exit %d): %s"
                         % (child.returncode, " ".join(command)))
    return json.loads(child.stdout.strip().splitlines()[-1])


def describe(torch, args, runner, times_ms, losses, memory):
    """The run's JSON record, with `remat bench`'s field names."""
    blas_info = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    record = {
        "workload": args.workload,
        "policy": args.policy,
        "threads": args.threads,
        "device": "cpu",
        "step_ms_median": round(statistics.median(times_ms), 3),
        "step_ms_min": round(min(times_ms), 3),
        "step_ms_max": round(max(times_ms), 3),
        "predicted_peak_activation_bytes": None,
        "peak_total_bytes": None,
        "recompute_ms": 0,
        "recompute_flops": 0,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "steps_timed": args.steps,
        "parameters": sum(p.numel() for p in runner.model.parameters()),
        "engine": "pytorch",
        "torch_version": torch.__version__,
        "blas": ":".join(loaded_libraries("blas")) or "none loaded",
        "blas_config": "BLAS_INFO=" + (blas_info.group(1) if blas_info else "unknown"),
        "attention": args.attention,
    }
    record.update(memory)
    if args.policy == "compile":
        record["checkpoint"] = None
        record["memory_budget"] = args.memory_budget
    elif args.policy != "none":
        record["checkpoint"] = "torch.utils.checkpoint(%s)" % ", ".join(
            "%s=%s" % item for item in checkpoint_kwargs().items())
    return record


def measure_memory(args):
    """Saved bytes and the RSS rise of a step, in a process of its own; under compile, also what
    the partitioner chose."""
    malloc_ok = configure_malloc()

    torch = import_torch()
    torch.set_num_threads(args.threads)
    partitions = None
    if args.policy == "compile":
        import torch_compile
        torch_compile.require_compile(torch, args.memory_budget)
        partitions = torch_compile.PartitionLog(torch).partitions
    runner = build(torch, args)
    for _ in range(WARMUP_STEPS):
        runner.step()
    set_openblas_threads(args.threads)
    memory = {
        "saved_bytes_after_forward": runner.saved_bytes_after_forward(),
        "peak_activation_bytes": runner.peak_rss_rise(PEAK_STEPS),
        "peak_method": "rss_rise_sampled_0.5ms_max_of_%d_steps_in_a_child_process%s" % (
            PEAK_STEPS, "" if malloc_ok else "_mallopt_failed"),
    }
    if partitions is not None:
        memory["partitions"] = partitions
    return memory


if __name__ == "__main__":
    main()
