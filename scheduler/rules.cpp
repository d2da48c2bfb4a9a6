// Rules over node names; see rules.h.
#include "scheduler/rules.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/error.h"

namespace remat::scheduler {
namespace {

// The name less its "#k", if it has one.
std::string_view without_repeat(std::string_view name) {
  const size_t hash = name.rfind('#');
  return hash == std::string_view::npos ? name : name.substr(0, hash);
}

// `name` and each of its tails that begins after a '.' of its module path:
// what a rule over names is matched against.
std::vector<std::string_view> tails(std::string_view name) {
  std::vector<std::string_view> out{name};
  const size_t slash = name.find('/');
  for (size_t i = 0; i < slash && i < name.size(); ++i) {
    if (name[i] == '.') out.push_back(name.substr(i + 1));
  }
  return out;
}

// The fewest single-character edits that make `text` match the glob
// `pattern` ('*' and '?' match as in glob_match at no cost).
size_t glob_distance(std::string_view pattern, std::string_view text) {
  std::vector<size_t> row(text.size() + 1), next(text.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});  // an empty pattern: delete every character
  for (char p : pattern) {
    next[0] = p == '*' ? row[0] : row[0] + 1;
    for (size_t j = 1; j <= text.size(); ++j) {
      if (p == '*') {
        next[j] = std::min(row[j], next[j - 1]);
      } else {
        const size_t substitute = row[j - 1] + (p == '?' || p == text[j - 1] ? 0 : 1);
        next[j] = std::min({substitute, row[j] + 1, next[j - 1] + 1});
      }
    }
    std::swap(row, next);
  }
  return row.back();
}

// The `count` nearest of `candidates` by `distance` (nearest first, ties in
// their order).
std::vector<std::string> nearest_by(const std::vector<std::string>& candidates, size_t count,
                                    const std::function<size_t(const std::string&)>& distance) {
  std::vector<std::pair<size_t, size_t>> ranked;  // (distance, index)
  for (size_t i = 0; i < candidates.size(); ++i) ranked.emplace_back(distance(candidates[i]), i);
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < ranked.size() && i < count; ++i) out.push_back(candidates[ranked[i].second]);
  return out;
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view text) {
  // Greedy with backtracking to the latest '*': linear in practice.
  size_t p = 0, t = 0, star = std::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool names_node(std::string_view rule, const NodeProfile& node) {
  if (rule.find('/') == std::string_view::npos) return glob_match(rule, node.op);
  const std::string_view name = rule.find('#') == std::string_view::npos ? without_repeat(node.name) : node.name;
  const std::vector<std::string_view> candidates = tails(name);
  return std::any_of(candidates.begin(), candidates.end(), [&](std::string_view t) { return glob_match(rule, t); });
}

std::vector<std::string> nearest_names(const GraphProfile& graph, std::string_view text, size_t count) {
  const bool by_name = text.find('/') != std::string_view::npos;
  std::vector<std::string> candidates;  // each name (or op) once, in graph order
  for (const NodeProfile& node : graph.nodes) {
    const std::string& candidate = by_name ? node.name : node.op;
    if (std::find(candidates.begin(), candidates.end(), candidate) == candidates.end()) candidates.push_back(candidate);
  }
  return nearest_by(candidates, count, [&](const std::string& candidate) {
    size_t distance = std::numeric_limits<size_t>::max();
    for (std::string_view tail : by_name ? tails(candidate) : std::vector<std::string_view>{candidate}) {
      distance = std::min(distance, glob_distance(text, tail));
    }
    return distance;
  });
}

std::vector<std::string> nearest_of(const std::vector<std::string>& candidates, std::string_view text, size_t count) {
  return nearest_by(candidates, count, [&](const std::string& candidate) { return glob_distance(text, candidate); });
}

std::vector<int64_t> nodes_named(const GraphProfile& graph, std::string_view rule, std::string_view kind) {
  REMAT_CHECK(!rule.empty(), "plan: an empty {} rule (an op such as gelu, or a node name such as h.*.attn/*)", kind);
  std::vector<int64_t> named;
  for (const NodeProfile& node : graph.nodes) {
    if (names_node(rule, node)) named.push_back(node.position);
  }
  if (named.empty()) {
    const bool by_name = rule.find('/') != std::string_view::npos;
    REMAT_FAIL("plan: the {} rule '{}' names no {} of this graph of {} nodes; nearest: {} (rules: an op such as "
               "gelu, or a glob over node names module/op such as h.*.attn/*; `remat explain` lists the names)",
               kind, rule, by_name ? "node" : "op", graph.size(), fmt::join(nearest_names(graph, rule), ", "));
  }
  return named;
}

}  // namespace remat::scheduler
