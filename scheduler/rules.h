// User rules over a profiled graph: which nodes a rule names, by op or by
// node name (Note [Node names] in engine/recording.h), and the error a rule
// that names none of them is. Rules are how must_keep, must_recompute,
// prefer_keep and prefer_recompute (plan.h, Overrides) and the presets
// (policies/presets.cpp) pick nodes.
//
//   names_node("gelu", node)              // an op: every GELU
//   names_node("h.*.attn/*", node)        // every op recorded in a block's attn itself
//   names_node("h.*.attn*/*", node)       // ... and in its children (c_attn, c_proj)
//   names_node("h.3.mlp.c_fc/affine", node)
//   nodes_named(graph, "h.*.atn/*", "must-recompute")  // error: names no node;
//                                                       // nearest: h.0.attn/softmax, ...
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/profile.h"

namespace remat::scheduler {

// A glob: '*' matches any run of characters ('.' and '/' included), '?'
// any one character, everything else itself; the whole of `text`.
bool glob_match(std::string_view pattern, std::string_view text);

// Whether `rule` names `node`. A rule with a '/' is a glob over node names,
// matched against the whole name or the name less leading components of its
// module path: "h.*.attn/*" names "transformer.h.3.attn/softmax". Without a
// "#" of its own it ignores a name's "#k": "h.0.attn/matmul" names both of
// that module's matmuls, "h.0.attn/matmul#1" the second. A rule without '/'
// is a glob over ops: "gelu", "*norm*".
bool names_node(std::string_view rule, const NodeProfile& node);

// The positions of the nodes `rule` names, in order. Naming none is an
// error that says which rule (`kind`, e.g. "must-keep") and lists the names
// and ops of the graph nearest to it: a typo is never a rule that quietly
// does nothing.
std::vector<int64_t> nodes_named(const GraphProfile& graph, std::string_view rule, std::string_view kind);

// The names and ops of `graph` nearest to `text` by edit distance (at most
// `count`, nearest first, ties in graph order), for error messages.
std::vector<std::string> nearest_names(const GraphProfile& graph, std::string_view text, size_t count = 5);
// The same over any list of strings (module names, say).
std::vector<std::string> nearest_of(const std::vector<std::string>& candidates, std::string_view text,
                                    size_t count = 5);

}  // namespace remat::scheduler
