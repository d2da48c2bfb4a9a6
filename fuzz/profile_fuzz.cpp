// libFuzzer target: scheduler/profile_json.h's profile_from_json (the
// `remat explain --profile` and Checkpointer::plan_from input) on arbitrary
// text. An accepted profile writes back to JSON that reads as the same
// graph (same signature and nodes). Seeds: fuzz/corpus/profile_fuzz/.
#include <string_view>

#include "fuzz/fuzz_input.h"
#include "scheduler/profile_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  remat::fuzz::expect_result_or_error("profile_from_json", [&] {
    const remat::scheduler::GraphProfile graph = remat::scheduler::profile_from_json(text);
    const remat::scheduler::GraphProfile again =
        remat::scheduler::profile_from_json(remat::scheduler::profile_to_json(graph));
    FUZZ_CHECK(again.signature == graph.signature && again.nodes.size() == graph.nodes.size(),
               "a written-back profile of {} nodes read as {} nodes", graph.nodes.size(), again.nodes.size());
  });
  return 0;
}
