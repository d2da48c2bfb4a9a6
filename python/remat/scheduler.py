"""remat.scheduler: the engine seen from inside (python/scheduler.cpp and plans.cpp bind
it; examples/tour.py walks through it, the twin of docs/tour.md's C++).

    class Narrator(remat.scheduler.Observer):            # hear the engine's events
        def recorded(self, node):
            print(node["op"], node["output_bytes"], node["tag"], node["saved"])

    with Narrator(), remat.scheduler.RecomputeScope(lambda node: "recompute" if node["op"] == "relu" else "keep"):
        loss = (remat.relu(x) + remat.tanh(x @ w)).sum()
    loss.backward()                                      # replays and backwards are heard too

    with remat.scheduler.Profiling():                    # measure one step, then plan it
        loss = step()
        loss.backward()
        profile = remat.scheduler.profile_graph(loss)
    plan = remat.scheduler.make_plan(profile, policy="cost", budget="64MiB")
    remat.scheduler.simulate(profile, plan.tags)["peak_bytes"]

Tags are the words "keep" and "recompute"; byte counts are the allocator's
(memory_stats()); engine errors arrive as remat.Error.
"""
from ._remat import (Checkpointer, Plan, Profile, ProfileNode, Profiling, RecomputeScope, category,
                     checkpointing_plan, checkpointing_profile, effective_tags, make_plan, memory_stats, peak_watch,
                     policy_names, profile_graph, simulate, to_dot, _ObserverScope)

__all__ = ["Observer", "RecomputeScope", "category", "memory_stats", "peak_watch", "Profiling", "profile_graph",
           "Profile", "ProfileNode", "simulate", "effective_tags", "make_plan", "Plan", "policy_names", "to_dot",
           "Checkpointer", "checkpointing_profile", "checkpointing_plan"]


class Observer:
    """Hears the engine's events for the nodes recorded inside `with observer:`
    (engine/observer.h, Note [Graph events]); override the ones you want.
    A node keeps its observer, so its replays and its backward are heard
    even after the `with` has ended. Each `node` is a dict of what the
    engine recorded: id (recording order), op, tag ("keep" or "recompute"),
    output_shape, output_dtype, output_bytes, is_view, saved (what its
    backward reads: "output", "side result" or an input's index), inputs
    (the ids of the nodes that made them, -1 for a leaf or constant),
    block, compute_bound, flops. An exception raised here stops the engine's
    call and reaches its caller."""

    def recorded(self, node):
        """The node is in the graph: its forward ran, its tag and saved values are set."""

    def replay_started(self, node):
        """A dropped value is about to be rebuilt by replaying its node."""

    def replayed(self, node, in_place):
        """The replay ran; in_place: it wrote its output over its input (Note [Replays in place])."""

    def backward_started(self, node):
        """The node's backward is about to run (its saved values rebuilt)."""

    def backward_finished(self, node):
        """The node's backward ran; its saved values go after it."""

    def saved_value_released(self, node, saved):
        """The node's backward let go of a saved value early ("output", "side result" or an input's index)."""

    def pass_started(self, root):
        """A backward pass from `root` begins."""

    def pass_finished(self, root):
        """The backward pass from `root` has run every node."""

    def failed(self, node):
        """The node's forward, replay or backward raised."""

    def __enter__(self):
        self.__dict__.setdefault("_observer_scopes", []).append(_ObserverScope(self))
        return self

    def __exit__(self, *exc):
        self._observer_scopes.pop().close()
