// A graph's profile saved as JSON and read back: every field the planners
// and the simulator read, so that a plan made from a saved profile is the
// same on any run or machine (make_plan is deterministic for a profile),
// and a Checkpointer can plan a graph's first step before it runs
// (Checkpointer::plan_from). Written by `remat explain --save-profile`,
// read by `--profile`.
#pragma once

#include <string>
#include <string_view>

#include "scheduler/profile.h"

namespace remat::scheduler {

// One JSON object ("format": "remat-profile", "version": 1), times with
// every digit they hold, so that from_json(to_json(g)) plans as g does.
std::string profile_to_json(const GraphProfile& graph);
// Errors name what is wrong: not JSON, another format or version, a field
// missing or of the wrong type, an edge or index out of range, or a
// signature that does not match the nodes (a profile edited by hand).
GraphProfile profile_from_json(std::string_view text);

// The same through a file; errors name the path.
void save_profile(const GraphProfile& graph, const std::string& path);
GraphProfile load_profile(const std::string& path);

}  // namespace remat::scheduler
