// The presets: the anchors of other tools as named policies, so that they
// are compared with the planners on the same graph, budget and simulator
// (docs/checkpointing.md, "Presets"). Each takes a budget where it can; a
// preset that names nothing in the graph is an error (Note [Nothing
// silent] in scheduler/plan.cpp).
//
//   save-matmuls            keep what compute-bound ops make (GEMMs), replay
//                           the rest: torchtitan's selective checkpointing by
//                           op. With a budget, kept GEMM outputs are dropped,
//                           cheapest to rebuild per byte first, until it fits.
//   every-n-blocks:N        replay block i from its input when i % N == 0 and
//                           keep the other blocks whole (after Megatron's
//                           --recompute-method uniform and block, which
//                           replay groups of layers or the first N; N = 1 is
//                           blocks). With a budget: the largest N' <= N (N:
//                           the block count if not given) whose plan fits.
//   recompute-modules:M,... replay every node of the named modules and their
//                           children (Megatron's --recompute-modules), keep
//                           the rest; with a budget, cost plans the rest.
//                           Besides names and globs of module path parts,
//                           Megatron-Core's words: "norm" or "layernorm" (the
//                           norms: ln_*, *norm*), "attn" (attention modules:
//                           attn, self_attn), "core_attn" (attention between
//                           its projections: Note [Core attention]); "moe"
//                           is an error, remat having no MoE layers.
#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "scheduler/policies/policy.h"
#include "scheduler/rules.h"

namespace remat::scheduler::policies {
namespace {

using search::Candidate;
using search::Context;

// `tags` with the rules' tags and unread feeders settled, simulated.
Candidate settled(const Context& c, std::vector<Tag> tags, std::string origin) {
  tags = c.with_forced(std::move(tags));
  search::settle_unread(c, tags);
  Simulation sim = c.simulate(tags);
  return {std::move(tags), std::move(sim), std::move(origin)};
}

bool fits(const Request& request, const Candidate& plan) {
  return !request.budget || plan.sim.peak_bytes <= request.target;
}

Answer answer(Candidate plan, std::string_view preset) {
  return {.tags = std::move(plan.tags), .detail = std::move(plan.origin), .chosen_by = std::string(preset)};
}

// The blocks of the graph (NodeProfile::block), in the order they begin.
std::vector<std::string> blocks_in_order(const Context& c) {
  std::vector<std::string> blocks;
  for (const NodeProfile& node : c.graph.nodes) {
    if (!node.block.empty() && std::find(blocks.begin(), blocks.end(), node.block) == blocks.end()) {
      blocks.push_back(node.block);
    }
  }
  return blocks;
}

// Blocks 0, n, 2n, ... replayed from their inputs, the others kept.
Candidate every_n(const Context& c, const std::vector<std::string>& blocks, int64_t n) {
  std::vector<std::string> replayed;
  for (size_t i = 0; i < blocks.size(); i += static_cast<size_t>(n)) replayed.push_back(blocks[i]);
  std::vector<Tag> tags = some_blocks_tags(c, replayed);
  Simulation sim = c.simulate(tags);
  return {std::move(tags), std::move(sim),
          fmt::format("every {} block(s) replayed from its input: {} of {}", n, replayed.size(), blocks.size())};
}

// The components of a module path ("transformer.h.3.attn" -> 4 of them).
std::vector<std::string_view> components(std::string_view module) {
  std::vector<std::string_view> parts;
  while (!module.empty()) {
    const size_t dot = module.find('.');
    parts.push_back(module.substr(0, dot));
    module = dot == std::string_view::npos ? std::string_view() : module.substr(dot + 1);
  }
  return parts;
}

// An attention module's name: GPT-2's "attn", Llama's "self_attn".
bool is_attention(std::string_view part) { return part == "attn" || part == "self_attn"; }

// Note [Core attention]
// Megatron-Core's core_attn is attention without its projections: the
// scores, their mask and softmax, attention dropout and the weighted sum of
// the values; not q, k, v, o nor the rotary embedding of q and k. Here: the
// nodes an attention module records itself with one of those ops (GPT's
// matmuls and causal_softmax, Llama's fused attention node) and the
// dropout of its attn_dropout child. Views among them hold no bytes, and
// the projections' nodes belong to child modules, so neither counts.
bool is_core_attention(const NodeProfile& node) {
  const std::vector<std::string_view> parts = components(node.module);
  if (parts.empty()) return false;
  if (node.op == "dropout") return parts.back() == "attn_dropout";
  const bool core_op = node.op == "attention" || node.op == "matmul" || node.op == "causal_softmax" ||
                       node.op == "softmax" || node.op == "masked_fill";
  return core_op && is_attention(parts.back());
}

// Whether a recompute-modules item names a node: core_attn as above, else a
// component of its module's path matches the item's glob, or Megatron's
// word for it ("norm" or "layernorm": ln_* or *norm*; "attn": attn or
// self_attn).
bool in_module(std::string_view item, const NodeProfile& node) {
  if (item == "core_attn") return is_core_attention(node);
  for (std::string_view part : components(node.module)) {
    const bool named = item == "norm" || item == "layernorm" ? glob_match("ln_*", part) || glob_match("*norm*", part)
                       : item == "attn"                     ? is_attention(part)
                                                            : glob_match(item, part);
    if (named) return true;
  }
  return false;
}

// Per node: named by one of the comma-separated `items`; an item naming
// no node is an error listing the nearest module names.
std::vector<bool> named_by_modules(const Context& c, std::string_view items) {
  const std::string_view request_items = items;
  std::vector<bool> named(c.graph.size(), false);
  std::vector<std::string> modules;  // every component, for the error
  for (const NodeProfile& node : c.graph.nodes) {
    for (std::string_view part : components(node.module)) {
      if (std::find(modules.begin(), modules.end(), part) == modules.end()) modules.emplace_back(part);
    }
  }
  while (true) {
    const size_t comma = items.find(',');
    const std::string_view item = items.substr(0, comma);
    REMAT_CHECK(!item.empty(), "policy recompute-modules:{}: an empty item in the list (modules by name or glob, "
                "comma-separated: recompute-modules:attn,mlp,norm)", request_items);
    bool any = false;
    for (const NodeProfile& node : c.graph.nodes) {
      if (in_module(item, node)) named[node.position] = any = true;
    }
    REMAT_CHECK(any || item != "moe", "policy recompute-modules: 'moe' names no module of this graph: remat has no "
                "mixture-of-experts layers (Megatron's moe, moe_act and shared_experts); core_attn, attn, mlp and norm "
                "name the parts of a dense transformer block");
    REMAT_CHECK(any, "policy recompute-modules: '{}' names no module of this graph; nearest: {} (modules by name or "
                "glob, comma-separated: recompute-modules:attn,mlp,norm)", item,
                fmt::join(nearest_of(modules, item), ", "));
    if (comma == std::string_view::npos) return named;
    items.remove_prefix(comma + 1);
  }
}

}  // namespace

Answer plan_save_matmuls(const Request& request) {
  const Context& c = request.c;
  std::vector<Tag> tags(c.graph.size(), Tag::Keep);
  std::vector<int64_t> gemms;
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    if (!c.decidable(v)) continue;
    if (c.graph.nodes[v].compute_bound) {
      gemms.push_back(v);
    } else {
      tags[v] = Tag::Recompute;
    }
  }
  REMAT_CHECK(!gemms.empty(), "policy save-matmuls: no compute-bound node of this graph (matmul, linear, affine) is "
              "read by backward: it has nothing to save");
  Candidate plan = settled(c, tags, fmt::format("keeps the outputs of the {} compute-bound nodes backward reads, "
                                                "replays the rest", gemms.size()));
  if (fits(request, plan)) return answer(std::move(plan), "save-matmuls");
  std::stable_sort(gemms.begin(), gemms.end(), [&](int64_t a, int64_t b) {
    return c.graph.nodes[a].ms_per_mib() < c.graph.nodes[b].ms_per_mib();
  });
  for (size_t dropped = 1; dropped <= gemms.size(); ++dropped) {
    tags[gemms[dropped - 1]] = Tag::Recompute;
    plan = settled(c, tags, fmt::format("keeps {} of the {} compute-bound outputs backward reads: the {} cheapest to "
                                        "rebuild per byte dropped to fit the budget", gemms.size() - dropped,
                                        gemms.size(), dropped));
    if (fits(request, plan)) return answer(std::move(plan), "save-matmuls");
  }
  return fall_back(request, "save-matmuls");
}

Answer plan_every_n_blocks(const Request& request) {
  const Context& c = request.c;
  const std::vector<std::string> blocks = blocks_in_order(c);
  REMAT_CHECK(!blocks.empty(), "policy every-n-blocks: this graph has no blocks (a model marks them with a "
              "BlockScope, as GPT's transformer.h.i)");
  int64_t n = 0;
  const std::string_view text = request.argument;
  if (!text.empty()) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
    REMAT_CHECK(error == std::errc() && end == text.data() + text.size() && n >= 1, "policy every-n-blocks:{}: N "
                "must be a whole number of blocks >= 1 (every-n-blocks:2)", text);
  }
  REMAT_CHECK(n > 0 || request.budget, "policy every-n-blocks needs N (every-n-blocks:2), or a budget to choose it");
  if (!request.budget) return answer(every_n(c, blocks, n), "every-n-blocks");
  for (int64_t k = n > 0 ? n : static_cast<int64_t>(blocks.size()); k >= 1; --k) {
    Candidate plan = every_n(c, blocks, k);
    if (fits(request, plan)) {
      plan.origin += fmt::format(" (the largest N up to {} that fits)", n > 0 ? n : static_cast<int64_t>(blocks.size()));
      return answer(std::move(plan), "every-n-blocks");
    }
  }
  return fall_back(request, "every-n-blocks");
}

Answer plan_recompute_modules(const Request& request) {
  const Context& c = request.c;
  REMAT_CHECK(!request.argument.empty(), "policy recompute-modules needs the modules it replays, comma-separated "
              "(recompute-modules:attn,mlp,norm)");
  const std::vector<bool> named = named_by_modules(c, request.argument);
  std::vector<Tag> tags(c.graph.size(), Tag::Keep);
  int64_t replayed = 0;
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    if (named[v] && c.decidable(v)) {
      tags[v] = Tag::Recompute;
      ++replayed;
    }
  }
  const std::string origin = fmt::format("replays the {} nodes of modules {} that backward reads", replayed,
                                         request.argument);
  Candidate plan = settled(c, tags, origin);
  if (fits(request, plan)) return answer(std::move(plan), "recompute-modules");
  // The named modules replayed whatever cost decides; cost plans the rest.
  Context around = c;
  for (int64_t v = 0; v < c.graph.size(); ++v) {
    if (named[v] && c.decidable(v)) around.forced[v] = Tag::Recompute;
  }
  Answer rest = plan_cost({.c = around, .budget = request.budget, .target = request.target,
                           .fallback = request.fallback, .current = request.current,
                           .time_limit_s = request.time_limit_s, .custom = request.custom});
  rest.detail = fmt::format("{}; the rest planned by cost to fit the budget: {}", origin, rest.detail);
  if (rest.chosen_by == "cost") rest.chosen_by = "recompute-modules";
  return rest;
}

}  // namespace remat::scheduler::policies
