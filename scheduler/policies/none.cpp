// Policy `none`: keep every output (only user rules replay anything).
#include "scheduler/policies/policy.h"

namespace remat::scheduler::policies {

Answer plan_none(const Request& request) {
  const search::Context& c = request.c;
  return {.tags = c.with_forced(std::vector<Tag>(c.graph.size(), Tag::Keep)), .detail = "keep all",
          .chosen_by = "none"};
}

}  // namespace remat::scheduler::policies
