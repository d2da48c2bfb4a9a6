// to_dot: a plan as Graphviz text; see dot.h.
//
// Nodes are emitted inside their block's cluster, clusters in the order their
// first node was recorded, so that Graphviz lays a transformer out block by
// block. Edges are emitted after every node, at the top level: an edge inside
// a cluster would pull its other end into that cluster.
#include "scheduler/dot.h"

#include <fmt/format.h>

#include <map>
#include <vector>

#include "engine/error.h"

namespace remat::scheduler {
namespace {

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

bool is_view(const NodeProfile& n) { return n.view_of >= 0; }

// One node statement: its label (position, op, output shape, MiB), colour by
// kind, and the planner's reason as the tooltip an SVG viewer shows on hover.
std::string node_line(const NodeProfile& n, const Plan& plan) {
  const bool recomputed = plan.tags[n.position] == Tag::Recompute;
  const std::string label = fmt::format("#{} {}\n{}\n{}", n.position, n.op, str(n.output_shape),
                                        is_view(n) ? std::string("view") : fmt::format("{:.2f} MiB", mib(n.output_bytes)));
  std::string_view colour = recomputed ? kDotRecomputeColour : kDotKeepColour;
  std::string_view style = "filled";
  std::string border;
  if (is_view(n)) {
    // A view owns no bytes; its border still says whether it is rebuilt
    // (a view of a dropped value is dropped with it).
    colour = kDotViewColour;
    style = "filled,dashed";
    border = fmt::format(", color=\"{}\"", recomputed ? "red3" : "black");
  }
  const std::string& reason = n.position < static_cast<int64_t>(plan.reasons.size()) ? plan.reasons[n.position] : "";
  return fmt::format("n{} [label=\"{}\", fillcolor={}, style=\"{}\"{}, tooltip=\"{}: {}\"];", n.position,
                     dot_escape(label), colour, style, border, recomputed ? "recompute" : "keep", dot_escape(reason));
}

std::string title(const GraphProfile& graph, const Plan& plan) {
  std::string text = fmt::format("policy {}", plan.policy);
  if (plan.budget) text += fmt::format(", budget {:.2f} MiB", mib(*plan.budget));
  text += fmt::format("\n{} nodes; keeps {:.2f} MiB, drops {:.2f} MiB of what backward reads", graph.size(),
                      mib(plan.kept_bytes), mib(plan.dropped_bytes));
  text += fmt::format("\npredicted peak {:.2f} MiB, {} replays, {:.1f} ms of recompute", mib(plan.predicted.peak_bytes),
                      plan.predicted.replayed_nodes, plan.predicted.recompute_ms);
  return text;
}

}  // namespace

std::string dot_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c != '\r') {
      out += c;
    }
  }
  return out;
}

std::string to_dot(const GraphProfile& graph, const Plan& plan) {
  REMAT_CHECK(static_cast<int64_t>(plan.tags.size()) == graph.size(),
              "to_dot: the plan has {} tags but the graph has {} nodes (a plan of another graph?)", plan.tags.size(),
              graph.size());
  std::string out = "digraph remat_plan {\n";
  out += fmt::format("  graph [label=\"{}\", labelloc=t, fontname=\"Helvetica\", rankdir=TB];\n",
                     dot_escape(title(graph, plan)));
  out += "  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n";
  out += "  edge [arrowsize=0.6];\n";

  // Blocks in order of first appearance; "" (outside any block) at the top level.
  std::vector<std::string> blocks;
  std::map<std::string, std::vector<const NodeProfile*>> members;
  for (const NodeProfile& n : graph.nodes) {
    if (!n.block.empty() && !members.contains(n.block)) blocks.push_back(n.block);
    members[n.block].push_back(&n);
  }
  for (const std::string& block : blocks) {
    out += fmt::format("  subgraph \"cluster_{}\" {{\n", dot_escape(block));
    out += fmt::format("    label=\"{}\"; style=rounded; color=gray50;\n", dot_escape(block));
    for (const NodeProfile* n : members[block]) out += "    " + node_line(*n, plan) + "\n";
    out += "  }\n";
  }
  for (const NodeProfile* n : members[""]) out += "  " + node_line(*n, plan) + "\n";

  for (const NodeProfile& n : graph.nodes) {
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i] < 0) continue;  // a parameter or the batch: not a node of the graph
      const bool into_view = n.view_of == static_cast<int>(i);
      out += fmt::format("  n{} -> n{}{};\n", n.inputs[i], n.position, into_view ? " [style=dashed]" : "");
    }
  }

  out += "  subgraph cluster_legend {\n";
  out += "    label=\"legend\"; style=rounded; color=gray50;\n";
  out += fmt::format("    legend_keep [label=\"kept\", fillcolor={}, style=\"filled\"];\n", kDotKeepColour);
  out += fmt::format("    legend_recompute [label=\"recomputed in backward\", fillcolor={}, style=\"filled\"];\n",
                     kDotRecomputeColour);
  out += fmt::format("    legend_view [label=\"view (no storage)\", fillcolor={}, style=\"filled,dashed\"];\n",
                     kDotViewColour);
  out += "  }\n";
  out += "}\n";
  return out;
}

}  // namespace remat::scheduler
