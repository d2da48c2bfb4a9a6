// profile_to_json and profile_from_json; see profile_json.h. nlohmann's
// json is header-only (Debian's nlohmann-json3-dev, in the system include
// path); scheduler/ uses it in this file only, behind string interfaces.
#include "scheduler/profile_json.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/file_write.h"

namespace remat::scheduler {
namespace {

using Json = nlohmann::json;

constexpr const char* kFormat = "remat-profile";
// Version 2: each node's compute_bound (OpTraits), which planners had inferred from op names.
constexpr int kVersion = 2;

const char* tag_name(Tag tag) { return tag == Tag::Keep ? "keep" : "recompute"; }

Json dtypes_json(const std::vector<DType>& dtypes) {
  Json out = Json::array();
  for (DType d : dtypes) out.push_back(std::string(dtype_name(d)));
  return out;
}

void write_traits(Json& out, const OpTraits& traits);

Json node_json(const NodeProfile& n) {
  Json out{{"position", n.position}, {"recorded_index", n.recorded_index}, {"sequence_nr", n.sequence_nr},
           {"op", n.op}, {"input_shapes", n.input_shapes}, {"input_dtypes", dtypes_json(n.input_dtypes)},
           {"inputs", n.inputs}, {"leaves", n.leaves}, {"outside", n.outside}, {"output_shape", n.output_shape},
           {"output_dtype", std::string(dtype_name(n.output_dtype))}, {"output_bytes", n.output_bytes},
           {"view_of", n.view_of}, {"output_dense", n.output_dense}, {"forward_ms", n.forward_ms},
           {"replay_ms", n.replay_ms},
           {"replay_in_place_ms", n.replay_in_place_ms}, {"forward_peak_bytes", n.forward_peak_bytes},
           {"saved", n.saved}, {"side_bytes", n.side_bytes}, {"released_at", n.released_at},
           {"backward_ran", n.backward_ran}, {"backward_ms", n.backward_ms},
           {"backward_peak_bytes", n.backward_peak_bytes}, {"released_early", n.released_early},
           {"backward_late_peak_bytes", n.backward_late_peak_bytes}, {"grad_bytes", n.grad_bytes},
           {"block", n.block}, {"module", n.module}, {"name", n.name}, {"region", n.region},
           {"tag", tag_name(n.tag)}};
  write_traits(out, n);
  return out;
}

// Reads fields of one object, naming it (and the field) in every error.
class Reader {
 public:
  Reader(const Json& object, std::string where) : object_(object), where_(std::move(where)) {
    REMAT_CHECK(object_.is_object(), "profile JSON: {} is not an object", where_);
  }
  template <class T>
  T get(const char* key) const {
    const auto it = object_.find(key);
    REMAT_CHECK(it != object_.end(), "profile JSON: {} has no field '{}'", where_, key);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // nlohmann would convert 1.5 to 1, and a large value to a narrower T.
      REMAT_CHECK(it->is_number_integer(), "profile JSON: field '{}' of {} is {}, not an integer", key, where_,
                  it->dump());
      if constexpr (std::is_signed_v<T>) {
        const auto wide = it->template get<int64_t>();
        REMAT_CHECK(it->is_number_unsigned() ? it->template get<uint64_t>() <= uint64_t{INT64_MAX} : true,
                    "profile JSON: field '{}' of {} is {}, too large", key, where_, it->dump());
        REMAT_CHECK(wide >= std::numeric_limits<T>::min() && wide <= std::numeric_limits<T>::max(),
                    "profile JSON: field '{}' of {} is {}, outside [{}, {}]", key, where_, wide,
                    std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
        return static_cast<T>(wide);
      } else {
        REMAT_CHECK(it->is_number_unsigned(), "profile JSON: field '{}' of {} is {}, not an unsigned integer", key,
                    where_, it->dump());
      }
    }
    try {
      return it->template get<T>();
    } catch (const nlohmann::json::exception& e) {
      REMAT_FAIL("profile JSON: field '{}' of {} is {}, not what it should hold ({})", key, where_, it->dump(),
                 e.what());
    }
  }
  bool has(const char* key) const { return object_.contains(key); }
  // A count of bytes or FLOPs: an integer >= 0.
  int64_t count(const char* key) const {
    const auto value = get<int64_t>(key);
    REMAT_CHECK(value >= 0, "profile JSON: field '{}' of {} is {}: a count is >= 0", key, where_, value);
    return value;
  }
  // A tensor shape: dimensions >= 0 whose product, in bytes of the widest
  // dtype, fits in int64 (the simulator multiplies them).
  Shape shape(const Json& value, const std::string& what) const {
    Shape out;
    try {
      out = value.get<Shape>();
    } catch (const nlohmann::json::exception& e) {
      REMAT_FAIL("profile JSON: {} of {} is {}, not a shape ({})", what, where_, value.dump(), e.what());
    }
    int64_t elements = 8;
    for (int64_t d : out) {
      REMAT_CHECK(d >= 0 && !__builtin_mul_overflow(elements, d, &elements), "profile JSON: {} of {} is {}: "
                  "dimensions are >= 0 and their product fits in 64 bits", what, where_, value.dump());
    }
    return out;
  }
  double time(const char* key) const {
    const double ms = get<double>(key);
    REMAT_CHECK(std::isfinite(ms) && ms >= 0, "profile JSON: field '{}' of {} is {}: a time is finite and >= 0", key,
                where_, ms);
    return ms;
  }
  DType dtype(const std::string& name) const {
    for (DType d : {DType::Float32, DType::Float64, DType::Int64, DType::BFloat16, DType::Float16}) {
      if (dtype_name(d) == name) return d;
    }
    REMAT_FAIL("profile JSON: {} names dtype '{}' (known: float32, float64, int64, bfloat16, float16)", where_, name);
  }
  const std::string& where() const { return where_; }

 private:
  const Json& object_;
  std::string where_;
};

void check_index(int64_t value, int64_t low, int64_t high, const std::string& what, const std::string& where) {
  REMAT_CHECK(value >= low && value < high, "profile JSON: {} of {} is {}, outside [{}, {})", what, where, value, low,
              high);
}

// The op's traits (OpTraits, engine/record.h), written and read here and
// nowhere else: a new trait is a line in each.
void write_traits(Json& out, const OpTraits& traits) {
  out["compute_bound"] = traits.compute_bound;
  out["flops"] = traits.flops;
  out["replay_flops"] = traits.replay_flops;
  out["overwritable_input"] = traits.overwritable_input;
  out["replay_reuses_side_results"] = traits.replay_reuses_side_results;
}

void read_traits(const Reader& r, int64_t inputs, OpTraits& traits) {
  traits.compute_bound = r.get<bool>("compute_bound");
  traits.flops = r.count("flops");
  traits.replay_flops = r.count("replay_flops");
  traits.overwritable_input = r.get<int>("overwritable_input");
  check_index(traits.overwritable_input, -1, inputs, "overwritable_input", r.where());
  traits.replay_reuses_side_results = r.get<bool>("replay_reuses_side_results");
}

NodeProfile node_from(const Json& object, int64_t index, int64_t nodes, int64_t leaves, int64_t outside_inputs) {
  const Reader r(object, fmt::format("node {}", index));
  NodeProfile n;
  n.position = r.get<int64_t>("position");
  REMAT_CHECK(n.position == index, "profile JSON: node {} says it is at position {}", index, n.position);
  n.recorded_index = r.get<int64_t>("recorded_index");
  n.sequence_nr = r.get<uint64_t>("sequence_nr");
  n.op = r.get<std::string>("op");
  const Json shapes = r.get<Json>("input_shapes");
  REMAT_CHECK(shapes.is_array(), "profile JSON: input_shapes of {} is not a list", r.where());
  for (size_t i = 0; i < shapes.size(); ++i) n.input_shapes.push_back(r.shape(shapes[i], fmt::format("input shape {}", i)));
  for (const std::string& name : r.get<std::vector<std::string>>("input_dtypes")) n.input_dtypes.push_back(r.dtype(name));
  n.inputs = r.get<std::vector<int64_t>>("inputs");
  n.leaves = r.get<std::vector<int64_t>>("leaves");
  n.outside = r.get<std::vector<int64_t>>("outside");
  const size_t arity = n.inputs.size();
  REMAT_CHECK(n.input_shapes.size() == arity && n.input_dtypes.size() == arity && n.leaves.size() == arity &&
              n.outside.size() == arity, "profile JSON: {} has {} inputs but {} input shapes, {} input dtypes, {} "
              "leaves and {} outside entries", r.where(), arity, n.input_shapes.size(), n.input_dtypes.size(),
              n.leaves.size(), n.outside.size());
  for (size_t i = 0; i < arity; ++i) {
    check_index(n.inputs[i], -1, index, fmt::format("input {}", i), r.where());  // producers come first
    check_index(n.leaves[i], -1, leaves, fmt::format("leaf {}", i), r.where());
    check_index(n.outside[i], -1, outside_inputs, fmt::format("outside entry {}", i), r.where());
  }
  const auto inputs = static_cast<int64_t>(arity);
  n.output_shape = r.shape(r.get<Json>("output_shape"), "output_shape");
  n.output_dtype = r.dtype(r.get<std::string>("output_dtype"));
  n.output_bytes = r.count("output_bytes");
  n.view_of = r.get<int>("view_of");
  check_index(n.view_of, -1, inputs, "view_of", r.where());
  n.output_dense = r.get<bool>("output_dense");
  read_traits(r, inputs, n);
  n.forward_ms = r.time("forward_ms");
  n.replay_ms = r.time("replay_ms");
  n.replay_in_place_ms = r.time("replay_in_place_ms");
  n.forward_peak_bytes = r.count("forward_peak_bytes");
  n.saved = r.get<std::vector<int>>("saved");
  for (int slot : n.saved) check_index(slot, kSavedSideResult, inputs, "a saved slot", r.where());
  n.side_bytes = r.count("side_bytes");
  n.released_at = r.get<int64_t>("released_at");
  check_index(n.released_at, 0, nodes + 1, "released_at", r.where());
  n.backward_ran = r.get<bool>("backward_ran");
  n.backward_ms = r.time("backward_ms");
  n.backward_peak_bytes = r.count("backward_peak_bytes");
  n.released_early = r.get<int>("released_early");
  check_index(n.released_early, -1, static_cast<int64_t>(n.saved.size()), "released_early", r.where());
  n.backward_late_peak_bytes = r.count("backward_late_peak_bytes");
  n.grad_bytes = r.get<std::vector<int64_t>>("grad_bytes");
  REMAT_CHECK(n.grad_bytes.size() <= arity, "profile JSON: {} has {} gradient sizes for {} inputs", r.where(),
              n.grad_bytes.size(), arity);
  for (int64_t bytes : n.grad_bytes) {
    REMAT_CHECK(bytes >= kGradientAliasesOutput, "profile JSON: {} has a gradient of {} bytes", r.where(), bytes);
  }
  for (const auto& [key, bytes] : {std::pair{"output_bytes", n.output_bytes}, {"side_bytes", n.side_bytes},
                                   {"forward_peak_bytes", n.forward_peak_bytes}}) {
    REMAT_CHECK(bytes >= 0, "profile JSON: field '{}' of {} is {}, below 0", key, r.where(), bytes);
  }
  n.block = r.get<std::string>("block");
  // Profiles saved before nodes had names hold no module: their nodes are
  // named as ops of the outermost forward (Note [Node names]).
  n.module = r.has("module") ? r.get<std::string>("module") : std::string();
  n.region = r.get<uint64_t>("region");
  const std::string tag = r.get<std::string>("tag");
  REMAT_CHECK(tag == "keep" || tag == "recompute", "profile JSON: {} has tag '{}' (keep or recompute)", r.where(), tag);
  n.tag = tag == "keep" ? Tag::Keep : Tag::Recompute;
  return n;
}

}  // namespace

std::string profile_to_json(const GraphProfile& graph) {
  Json nodes = Json::array();
  for (const NodeProfile& node : graph.nodes) nodes.push_back(node_json(node));
  Json outside = Json::array();
  for (const OutsideInputProfile& input : graph.outside_inputs) {
    outside.push_back({{"bytes", input.bytes}, {"made_at", input.made_at}, {"released_at", input.released_at}});
  }
  const Json out{{"format", kFormat}, {"version", kVersion}, {"signature", graph.signature},
                 {"leaves", graph.leaves}, {"step_ms", graph.step_ms}, {"outside_inputs", outside}, {"nodes", nodes}};
  return out.dump(1) + "\n";
}

GraphProfile profile_from_json(std::string_view text) {
  Json json;
  try {
    json = Json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for a number past double's range
    REMAT_FAIL("profile JSON: not JSON ({})", e.what());
  }
  const Reader top(json, "the profile");
  const std::string format = top.get<std::string>("format");
  REMAT_CHECK(format == kFormat, "profile JSON: format '{}', expected '{}'", format, kFormat);
  const int version = top.get<int>("version");
  REMAT_CHECK(version == kVersion, "profile JSON: version {}, this build reads version {}", version, kVersion);
  GraphProfile graph;
  graph.signature = top.get<uint64_t>("signature");
  graph.leaves = top.get<int64_t>("leaves");
  REMAT_CHECK(graph.leaves >= 0, "profile JSON: {} leaves", graph.leaves);
  graph.step_ms = top.time("step_ms");
  const auto nodes = top.get<std::vector<Json>>("nodes");
  REMAT_CHECK(!nodes.empty(), "profile JSON: no nodes (a profile holds at least its root)");
  const auto n = static_cast<int64_t>(nodes.size());
  for (const Json& object : top.get<std::vector<Json>>("outside_inputs")) {
    const Reader r(object, fmt::format("outside input {}", graph.outside_inputs.size()));
    OutsideInputProfile input{.bytes = r.get<int64_t>("bytes"), .made_at = r.get<int64_t>("made_at"),
                              .released_at = r.get<int64_t>("released_at")};
    REMAT_CHECK(input.bytes >= 0 && input.made_at >= 0 && input.made_at < n && input.released_at >= input.made_at &&
                input.released_at <= n, "profile JSON: {} of {} bytes made at {} and released at {} in a graph of {} "
                "nodes", r.where(), input.bytes, input.made_at, input.released_at, n);
    graph.outside_inputs.push_back(input);
  }
  const auto outside = static_cast<int64_t>(graph.outside_inputs.size());
  for (int64_t v = 0; v < n; ++v) {
    graph.nodes.push_back(node_from(nodes[v], v, n, graph.leaves, outside));
    // Plans are applied by recorded index: one per recorded node, in order,
    // counting recorded nodes the profile leaves out.
    const int64_t recorded = graph.nodes.back().recorded_index;
    const int64_t previous = v == 0 ? -1 : graph.nodes[v - 1].recorded_index;
    REMAT_CHECK(recorded > previous && recorded >= v, "profile JSON: node {} has recorded_index {} after {}: they "
                "increase and are at least the position", v, recorded, previous);
  }
  name_nodes(graph);
  const uint64_t signature = signature_of(graph);
  REMAT_CHECK(signature == graph.signature, "profile JSON: signature {:016x} does not match its nodes' ({:016x}): "
              "edited, or written by another version", graph.signature, signature);
  return graph;
}

void save_profile(const GraphProfile& graph, const std::string& path) {
  write_file_atomically(path, profile_to_json(graph));  // a failed save leaves the old profile whole
}

GraphProfile load_profile(const std::string& path) {
  std::ifstream file(path);
  REMAT_CHECK(file.good(), "profile: cannot read '{}'", path);
  std::stringstream text;
  text << file.rdbuf();
  try {
    return profile_from_json(text.str());
  } catch (const Error& e) {
    REMAT_FAIL("profile '{}': {}", path, e.what());
  }
}

}  // namespace remat::scheduler
