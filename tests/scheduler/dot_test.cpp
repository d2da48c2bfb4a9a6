// to_dot on a graph small enough to draw by hand: the digraph header, one
// fill colour per tag, views dashed, blocks as clusters, one edge per input
// made inside the graph, escaped names. Graphviz itself is not needed.
#include "scheduler/dot.h"
#include "scheduler/profiler.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "ops/ops.h"

namespace remat::scheduler {
namespace {

// x (8, 4) -> [block: linear(4 -> 3) -> gelu -> relu] -> transpose view -> sum,
// after backward.
GraphProfile tiny_graph() {
  Profiling profiling;  // measure the graph recorded here
  Tensor w = ones({3, 4}).requires_grad_();
  Tensor x = ones({8, 4});
  Tensor h;
  {
    BlockScope block("body \"one\"");  // a quote in the name, to check escaping
    h = relu(gelu(linear(x, w)));
  }
  Tensor loss = sum(transpose(h, 0, 1));
  loss.backward();
  return profile_graph(loss);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Node statements of graph nodes (n<position> [...]), legend excluded.
std::vector<std::string> node_lines(const std::string& dot) {
  std::vector<std::string> out;
  for (const std::string& line : lines_of(dot)) {
    const size_t start = line.find_first_not_of(' ');
    if (start != std::string::npos && line[start] == 'n' && line.find(" [label=") != std::string::npos &&
        line.find("->") == std::string::npos) {
      out.push_back(line);
    }
  }
  return out;
}

int count_containing(const std::vector<std::string>& lines, const std::string& needle) {
  int n = 0;
  for (const std::string& line : lines) n += line.find(needle) != std::string::npos;
  return n;
}

TEST(Dot, OneBoxPerNodeColouredByTag) {
  const GraphProfile graph = tiny_graph();
  ASSERT_EQ(graph.size(), 5);
  const Plan plan = make_plan(graph, {.policy = "blocks"});
  // blocks replays the linear (read by gelu's backward, inside its block)
  // and keeps the relu that the transpose outside the block reads.
  ASSERT_EQ(plan.tags[0], Tag::Recompute);
  ASSERT_EQ(plan.tags[2], Tag::Keep);
  const std::string dot = to_dot(graph, plan);

  EXPECT_EQ(dot.rfind("digraph remat_plan {\n", 0), 0u) << dot;
  EXPECT_EQ(dot.back(), '\n');
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");

  const std::vector<std::string> nodes = node_lines(dot);
  ASSERT_EQ(nodes.size(), 5u) << dot;
  int kept = 0, recomputed = 0, views = 0;
  for (const NodeProfile& n : graph.nodes) {
    if (n.view_of >= 0) ++views;
    else (plan.tags[n.position] == Tag::Keep ? kept : recomputed) += 1;
  }
  EXPECT_EQ(views, 1);
  EXPECT_EQ(count_containing(nodes, "fillcolor=" + std::string(kDotKeepColour)), kept);
  EXPECT_EQ(count_containing(nodes, "fillcolor=" + std::string(kDotRecomputeColour)), recomputed);
  EXPECT_EQ(count_containing(nodes, "fillcolor=" + std::string(kDotViewColour)), views);
  EXPECT_EQ(count_containing(nodes, "dashed"), views);
  EXPECT_NE(nodes[0].find("fillcolor=salmon"), std::string::npos) << nodes[0];
  EXPECT_NE(nodes[0].find("#0 linear\\n(8, 3)\\n"), std::string::npos) << nodes[0];

  // linear's inputs (x, w) come from outside the graph; gelu, relu,
  // transpose and sum each read one node.
  EXPECT_EQ(count_containing(lines_of(dot), "->"), 4);
  EXPECT_NE(dot.find("n0 -> n1;"), std::string::npos);
  EXPECT_NE(dot.find("n1 -> n2;"), std::string::npos);
  EXPECT_NE(dot.find("n2 -> n3 [style=dashed];"), std::string::npos);  // into a view
  EXPECT_NE(dot.find("n3 -> n4;"), std::string::npos);

  EXPECT_NE(dot.find("subgraph \"cluster_body \\\"one\\\"\" {"), std::string::npos) << dot;
  EXPECT_NE(dot.find("subgraph cluster_legend {"), std::string::npos);
  EXPECT_NE(dot.find("legend_recompute"), std::string::npos);
}

TEST(Dot, KeepAllHasNoRecomputedBox) {
  const GraphProfile graph = tiny_graph();
  const std::string dot = to_dot(graph, make_plan(graph, {.policy = "none"}));
  EXPECT_EQ(count_containing(node_lines(dot), "fillcolor=" + std::string(kDotRecomputeColour)), 0);
  EXPECT_EQ(count_containing(node_lines(dot), "fillcolor=" + std::string(kDotKeepColour)), 4);
}

TEST(Dot, EscapesQuotesBackslashesAndLineBreaks) {
  EXPECT_EQ(dot_escape("a \"b\" \\ c\nd"), "a \\\"b\\\" \\\\ c\\nd");
  EXPECT_EQ(dot_escape(""), "");
}

TEST(Dot, APlanOfAnotherGraphIsAnError) {
  const GraphProfile graph = tiny_graph();
  Plan plan = make_plan(graph, {.policy = "none"});
  plan.tags.pop_back();
  EXPECT_THROW(to_dot(graph, plan), Error);
}

}  // namespace
}  // namespace remat::scheduler
