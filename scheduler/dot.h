// A plan drawn as a Graphviz DOT digraph: one box per node of the profiled
// graph, edges from the node that made each input, kept outputs filled one
// colour and replayed ones another, views grey and dashed, nodes grouped by
// the block that recorded them, and a legend. Text only: rendering is left
// to Graphviz (`dot -Tsvg graph.dot -o graph.svg`). Written by
// `remat tradeoff`; reads the plan, decides nothing.
//
//   const auto [graph, plan] = workloads::plan_workload({.workload = "W2", .policy = "cost"});
//   write_file_atomically("graph_cost.dot", scheduler::to_dot(graph, plan));   // engine/file_write.h
#pragma once

#include <string>
#include <string_view>

#include "scheduler/plan.h"

namespace remat::scheduler {

// Fill colours of the three kinds of node (also used by the legend).
inline constexpr std::string_view kDotKeepColour = "lightblue";
inline constexpr std::string_view kDotRecomputeColour = "salmon";
inline constexpr std::string_view kDotViewColour = "lightgrey";

// The DOT text of `plan` over `graph`; node `n<position>` is graph.nodes[position].
// Every label, tooltip and cluster name is escaped for a DOT quoted string.
// A plan of another graph (tags of another length) is an error.
std::string to_dot(const GraphProfile& graph, const Plan& plan);

// `text` as the inside of a DOT quoted string: `"` and `\` escaped, line
// breaks as DOT's centred `\n`.
std::string dot_escape(std::string_view text);

}  // namespace remat::scheduler
