// Safetensors files; see safetensors.h.
//
// Reading is two phases: parse_file() reads the whole file and validates the
// header against the body (every check the format allows) without building a
// tensor; only then do read_safetensors() build tensors, or load_safetensors()
// check the file against the model and copy. That order is what makes loading
// all or nothing: no parameter is written before every check has passed.
#include "nn/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "engine/autograd.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "engine/file_write.h"

namespace remat::nn {
namespace {

// Tensor bytes are copied as they lie in memory, and the format is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

// ordered_json keeps the header's key order, so read_safetensors() returns
// tensors in the order the writer listed them.
using Json = nlohmann::ordered_json;

constexpr std::string_view kMetadataKey = "__metadata__";
// The reference reader (safetensors' Rust crate) refuses headers above 100 MB;
// a larger length is a corrupt or foreign file, not a big model.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

std::string format_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int64: return "I64";
    case DType::BFloat16: return "BF16";
    case DType::Float16: return "F16";
  }
  return "?";
}

DType parse_dtype(const std::string& name, const std::string& path, const std::string& tensor) {
  if (name == "F32") return DType::Float32;
  if (name == "F64") return DType::Float64;
  if (name == "I64") return DType::Int64;
  if (name == "BF16") return DType::BFloat16;
  static const std::unordered_set<std::string> kKnown{"F16", "F8_E4M3", "F8_E5M2", "I8",  "I16", "I32",
                                                      "U8",  "U16",     "U32",     "U64", "BOOL"};
  REMAT_CHECK(!kKnown.contains(name),
              "safetensors '{}': tensor '{}' has dtype {}, which is not supported yet (F32, F64, I64 and BF16 are)",
              path, tensor, name);
  REMAT_FAIL("safetensors '{}': tensor '{}' has unknown dtype '{}'", path, tensor, name);
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "'" : ", '") + name + "'";
  return out;
}

// One tensor of the header: where its bytes lie, relative to the body.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin;
  uint64_t end;
};

struct ParsedFile {
  std::string path;
  std::vector<Entry> entries;  // header order
  SafetensorsMetadata metadata;
  std::vector<char> bytes;  // the whole file, or (header only) its first 8 + header length bytes
  uint64_t body_start = 0;  // 8 + header length

  const char* body() const { return bytes.data() + body_start; }
};

// The file's first `limit` bytes (all of them when it is shorter) and its size.
std::pair<std::vector<char>, uint64_t> read_prefix(const std::string& path, uint64_t limit) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  REMAT_CHECK(in.is_open(), "safetensors '{}': cannot open for reading: {}", path, std::strerror(errno));
  const std::streamoff size = in.tellg();
  REMAT_CHECK(size >= 0, "safetensors '{}': cannot tell the file size", path);
  const uint64_t count = std::min<uint64_t>(limit, static_cast<uint64_t>(size));
  std::vector<char> bytes(static_cast<size_t>(count));
  in.seekg(0);
  in.read(bytes.data(), static_cast<std::streamsize>(count));
  REMAT_CHECK(static_cast<uint64_t>(in.gcount()) == count, "safetensors '{}': read {} of {} bytes", path, in.gcount(),
              count);
  return {std::move(bytes), static_cast<uint64_t>(size)};
}

// A non-negative integer of the header, or an error naming what it is.
uint64_t unsigned_of(const Json& value, const std::string& path, const std::string& tensor, const char* what) {
  REMAT_CHECK(value.is_number_unsigned(), "safetensors '{}': tensor '{}': {} must be a non-negative integer, got {}",
              path, tensor, what, value.dump());
  return value.get<uint64_t>();
}

Entry parse_entry(const std::string& name, const Json& info, uint64_t body_size, const std::string& path) {
  REMAT_CHECK(info.is_object(), "safetensors '{}': tensor '{}': header entry must be an object, got {}", path, name,
              info.dump());
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    REMAT_CHECK(info.contains(key), "safetensors '{}': tensor '{}': header entry has no \"{}\"", path, name, key);
  }
  const Json& dtype = info["dtype"];
  REMAT_CHECK(dtype.is_string(), "safetensors '{}': tensor '{}': dtype must be a string, got {}", path, name,
              dtype.dump());
  Entry entry{name, parse_dtype(dtype.get<std::string>(), path, name), {}, 0, 0};

  const Json& shape = info["shape"];
  REMAT_CHECK(shape.is_array(), "safetensors '{}': tensor '{}': shape must be an array, got {}", path, name,
              shape.dump());
  uint64_t nbytes = dtype_size(entry.dtype);
  bool overflow = false;
  for (const Json& dim : shape) {
    const uint64_t size = unsigned_of(dim, path, name, "every dimension of shape");
    REMAT_CHECK(size <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                "safetensors '{}': tensor '{}': dimension {} is too large", path, name, size);
    entry.shape.push_back(static_cast<int64_t>(size));
    overflow = overflow || __builtin_mul_overflow(nbytes, size, &nbytes);
  }

  const Json& offsets = info["data_offsets"];
  REMAT_CHECK(offsets.is_array() && offsets.size() == 2,
              "safetensors '{}': tensor '{}': data_offsets must be [begin, end], got {}", path, name, offsets.dump());
  entry.begin = unsigned_of(offsets[0], path, name, "data_offsets begin");
  entry.end = unsigned_of(offsets[1], path, name, "data_offsets end");
  REMAT_CHECK(entry.begin <= entry.end, "safetensors '{}': tensor '{}': data_offsets [{}, {}] end before they begin",
              path, name, entry.begin, entry.end);
  REMAT_CHECK(entry.end <= body_size,
              "safetensors '{}': truncated body: tensor '{}' ends at byte {} of the body, which has only {} bytes",
              path, name, entry.end, body_size);
  REMAT_CHECK(!overflow && entry.end - entry.begin == nbytes,
              "safetensors '{}': tensor '{}': data_offsets [{}, {}] hold {} bytes, but dtype {} and shape {} need {}",
              path, name, entry.begin, entry.end, entry.end - entry.begin, dtype.get<std::string>(), str(entry.shape),
              overflow ? std::string("more than 2^64") : std::to_string(nbytes));
  return entry;
}

SafetensorsMetadata parse_metadata(const Json& value, const std::string& path) {
  REMAT_CHECK(value.is_object(), "safetensors '{}': __metadata__ must be an object of strings, got {}", path,
              value.dump());
  SafetensorsMetadata metadata;
  for (const auto& [key, item] : value.items()) {
    REMAT_CHECK(item.is_string(), "safetensors '{}': __metadata__ value of '{}' must be a string, got {}", path, key,
                item.dump());
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

// The tensors must tile the body exactly, as the reference reader demands:
// sorted by offset, each begins where the previous ends, the last ends at the
// end of the file. A gap or overlap means a corrupt header.
void check_tiling(std::vector<Entry> entries, uint64_t body_size, const std::string& path) {
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t expected = 0;
  const std::string* previous = nullptr;
  for (const Entry& entry : entries) {
    REMAT_CHECK(entry.begin >= expected,
                "safetensors '{}': tensor '{}' at data_offsets [{}, {}] overlaps tensor '{}', which ends at {}", path,
                entry.name, entry.begin, entry.end, previous ? *previous : std::string(), expected);
    REMAT_CHECK(entry.begin == expected,
                "safetensors '{}': tensor '{}' begins at byte {} of the body, leaving a gap after byte {}", path,
                entry.name, entry.begin, expected);
    expected = entry.end;
    previous = &entry.name;
  }
  REMAT_CHECK(expected == body_size, "safetensors '{}': the body has {} bytes but its tensors cover only {}", path,
              body_size, expected);
}

// The file validated, its body read too unless `header_only`.
ParsedFile parse_file(const std::string& path, bool header_only = false) {
  ParsedFile file;
  file.path = path;
  uint64_t file_size = 0;
  std::tie(file.bytes, file_size) = read_prefix(path, 8);
  REMAT_CHECK(file_size >= 8, "safetensors '{}': file of {} bytes is too short for the 8-byte header length", path,
              file_size);
  uint64_t header_size = 0;
  std::memcpy(&header_size, file.bytes.data(), 8);
  REMAT_CHECK(header_size <= file_size - 8, "safetensors '{}': header length {} is beyond the file of {} bytes", path,
              header_size, file_size);
  REMAT_CHECK(header_size <= kMaxHeaderBytes, "safetensors '{}': header length {} exceeds the {} byte limit", path,
              header_size, kMaxHeaderBytes);
  file.bytes = read_prefix(path, header_only ? 8 + header_size : file_size).first;
  REMAT_CHECK(file.bytes.size() == (header_only ? 8 + header_size : file_size), "safetensors '{}': the file changed "
              "size while being read", path);
  file.body_start = 8 + header_size;
  const uint64_t body_size = file_size - file.body_start;

  // ordered_json keeps the last of duplicate keys silently; the callback sees
  // every top-level key as it is parsed (depth 1), so duplicates are caught here.
  std::unordered_set<std::string> seen;
  std::string duplicate;
  const auto on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth == 1 && event == Json::parse_event_t::key && duplicate.empty()) {
      std::string key = parsed.get<std::string>();
      if (!seen.insert(key).second) duplicate = std::move(key);
    }
    return true;
  };
  const char* header_begin = file.bytes.data() + 8;
  Json header;
  try {
    header = Json::parse(header_begin, header_begin + header_size, on_event);
  } catch (const Json::exception& e) {
    REMAT_FAIL("safetensors '{}': header of {} bytes is not valid JSON: {}", path, header_size, e.what());
  }
  REMAT_CHECK(duplicate.empty(), "safetensors '{}': tensor name '{}' appears twice in the header", path, duplicate);
  REMAT_CHECK(header.is_object(), "safetensors '{}': header must be a JSON object, got {}", path,
              header.type_name());

  for (const auto& [name, info] : header.items()) {
    if (name == kMetadataKey) {
      file.metadata = parse_metadata(info, path);
    } else {
      file.entries.push_back(parse_entry(name, info, body_size, path));
    }
  }
  check_tiling(file.entries, body_size, path);
  return file;
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const SafetensorsMetadata& metadata) {
  AtomicFile file(path);  // Note [Whole or not at all]: a failed write leaves `path` as it was
  write_safetensors(file, tensors, metadata);
  file.commit();
}

void write_safetensors(AtomicFile& file, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const SafetensorsMetadata& metadata) {
  const std::string& path = file.path();
  // Everything that can fail on the inputs fails here, before a byte is written.
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header[std::string(kMetadataKey)] = std::move(meta);
  }
  std::unordered_set<std::string> names;
  std::vector<Tensor> bodies;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    REMAT_CHECK(!name.empty(), "write_safetensors '{}': a tensor has an empty name", path);
    REMAT_CHECK(name != kMetadataKey, "write_safetensors '{}': '{}' is reserved for metadata", path, name);
    REMAT_CHECK(names.insert(name).second, "write_safetensors '{}': tensor name '{}' appears twice", path, name);
    REMAT_CHECK(tensor.defined(), "write_safetensors '{}': tensor '{}' is undefined", path, name);
    REMAT_CHECK(!tensor.device().is_meta(), "write_safetensors '{}': tensor '{}' is on the meta device, which holds "
                "no values", path, name);
    const DType dtype = tensor.dtype();
    REMAT_CHECK(dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::Int64 ||
                    dtype == DType::BFloat16,
                "write_safetensors '{}': tensor '{}' has dtype {} ({}), which is not supported yet (F32, F64, I64 and "
                "BF16 are)", path, name, format_dtype_name(dtype), dtype_name(dtype));
    bodies.push_back(dense(to(tensor, Device::cpu())));  // a GPU's tensors are copied to the CPU
    Json entry = Json::object();
    entry["dtype"] = format_dtype_name(dtype);
    entry["shape"] = tensor.shape();
    entry["data_offsets"] = Json::array({offset, offset + tensor.nbytes()});
    header[name] = std::move(entry);
    offset += tensor.nbytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception& e) {  // e.g. a name that is not valid UTF-8
    REMAT_FAIL("write_safetensors '{}': cannot encode the header: {}", path, e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the body starts 8-byte aligned
  const uint64_t header_size = text.size();

  file.write(&header_size, 8);
  file.write(text.data(), text.size());
  for (const Tensor& body : bodies) {
    if (body.nbytes() > 0) file.write(body.raw_data(), body.nbytes());
  }
}

std::vector<std::pair<std::string, Tensor>> read_safetensors(const std::string& path) {
  const ParsedFile file = parse_file(path);
  std::vector<std::pair<std::string, Tensor>> tensors;
  tensors.reserve(file.entries.size());
  for (const Entry& entry : file.entries) {
    Tensor t(entry.shape, entry.dtype);
    if (t.nbytes() > 0) std::memcpy(t.raw_data(), file.body() + entry.begin, t.nbytes());
    tensors.emplace_back(entry.name, std::move(t));
  }
  return tensors;
}

SafetensorsMetadata read_safetensors_metadata(const std::string& path) { return parse_file(path).metadata; }

void save_safetensors(const Module& module, const std::string& path, const SafetensorsMetadata& metadata) {
  write_safetensors(path, module.named_parameters(), metadata);
}

void load_safetensors(Module& module, const std::string& path, SafetensorsLoadOptions options) {
  load_safetensors(module, std::vector<std::string>{path}, std::move(options));
}

std::vector<SafetensorsEntry> read_safetensors_header(const std::string& path) {
  const ParsedFile file = parse_file(path, /*header_only=*/true);
  std::vector<SafetensorsEntry> entries;
  for (const Entry& entry : file.entries) entries.push_back({entry.name, entry.dtype, entry.shape});
  return entries;
}

namespace {

// Whether a file's `from` goes into a parameter of `to`: the same dtype, or
// (widening) one that holds every value of it exactly.
bool converts(DType from, DType to, bool widen) {
  if (from == to) return true;
  if (!widen) return false;
  return (from == DType::BFloat16 && (to == DType::Float32 || to == DType::Float64)) ||
         (from == DType::Float32 && to == DType::Float64);
}

// `count` values of dtype `from` at `src` into `dst` of dtype `to`
// (converts(from, to)). A bfloat16 is a float32's upper 16 bits, so the
// widening is a shift: exact.
void copy_converted(void* dst, DType to, const char* src, DType from, int64_t count) {
  if (from == to) {
    std::memcpy(dst, src, static_cast<size_t>(count) * dtype_size(to));
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    float value = 0;
    if (from == DType::BFloat16) {
      uint16_t half = 0;
      std::memcpy(&half, src + 2 * i, 2);
      const uint32_t bits = static_cast<uint32_t>(half) << 16;
      std::memcpy(&value, &bits, 4);
    } else {
      std::memcpy(&value, src + 4 * i, 4);
    }
    if (to == DType::Float32) {
      static_cast<float*>(dst)[i] = value;
    } else {
      static_cast<double*>(dst)[i] = value;
    }
  }
}

}  // namespace

void load_safetensors(Module& module, const std::vector<std::string>& paths, SafetensorsLoadOptions options) {
  REMAT_CHECK(!paths.empty(), "load_safetensors: no file given");
  std::vector<ParsedFile> files;
  files.reserve(paths.size());
  for (const std::string& path : paths) files.push_back(parse_file(path));
  // Where the messages say the tensors come from: the file, or the files.
  const std::string where = paths.size() == 1 ? paths.front() : join(paths);
  struct Source {
    const Entry* entry;
    const ParsedFile* file;
  };
  std::unordered_map<std::string, Source> by_name;
  std::vector<std::pair<std::string, Source>> targets;  // the parameter each entry goes to, in file order
  for (const ParsedFile& file : files) {
    for (const Entry& entry : file.entries) {
      const std::string name = options.rename ? options.rename(entry.name) : entry.name;
      if (name.empty()) continue;
      const auto [it, fresh] = by_name.emplace(name, Source{&entry, &file});
      REMAT_CHECK(fresh || it->second.file != &file, "load_safetensors '{}': tensors '{}' and '{}' both go to "
                  "parameter '{}'", file.path, it->second.entry->name, entry.name, name);
      REMAT_CHECK(fresh, "load_safetensors: tensor '{}' of '{}' and tensor '{}' of '{}' both go to parameter '{}'",
                  it->second.entry->name, it->second.file->path, entry.name, file.path, name);
      targets.emplace_back(name, Source{&entry, &file});
    }
  }

  // Phase 1: the files against the model. Nothing is written until it passes.
  const auto params = module.named_parameters();
  std::vector<Source> sources;
  std::vector<std::string> missing;
  std::unordered_set<std::string> used;
  for (const auto& [name, p] : params) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      missing.push_back(name);
      sources.push_back({nullptr, nullptr});
      continue;
    }
    const Entry& entry = *it->second.entry;
    const std::string& path = it->second.file->path;
    REMAT_CHECK(converts(entry.dtype, p.dtype(), options.widen), "load_safetensors '{}': tensor '{}' has dtype {} in "
                "file, {} in model{}", path, name, format_dtype_name(entry.dtype), format_dtype_name(p.dtype()),
                options.widen ? " (a file's dtype is read into one that holds it exactly: BF16 into F32 or F64, F32 "
                                "into F64)" : "");
    REMAT_CHECK(entry.shape == p.shape(), "load_safetensors '{}': tensor '{}' has shape {} in file, {} in model", path,
                name, str(entry.shape), str(p.shape()));
    REMAT_CHECK(p.device().is_cpu() && p.is_contiguous(),
                "load_safetensors '{}': parameter '{}' ({}) must be a contiguous CPU tensor", path, name, p.str());
    sources.push_back(it->second);
    used.insert(name);
  }
  REMAT_CHECK(missing.empty(), "load_safetensors '{}': {} parameter(s) of the {} are missing from the file{}: {}",
              where, missing.size(), module.type_name(), paths.size() == 1 ? "" : "s", join(missing));
  if (!options.allow_unused) {
    std::vector<std::string> unused;
    for (const auto& [name, source] : targets) {
      if (!used.contains(name)) unused.push_back(source.entry->name);
    }
    std::sort(unused.begin(), unused.end());
    REMAT_CHECK(unused.empty(),
                "load_safetensors '{}': {} tensor(s) in the file{} name no parameter of the {}: {} "
                "(set allow_unused to ignore them)",
                where, unused.size(), paths.size() == 1 ? "" : "s", module.type_name(), join(unused));
  }

  // Phase 2: copy. An in-place write of parameters, like an optimizer step.
  NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i].second;
    const Source& source = sources[i];
    if (p.nbytes() > 0) {
      copy_converted(p.raw_data(), p.dtype(), source.file->body() + source.entry->begin, source.entry->dtype,
                     p.numel());
    }
    p.storage()->bump_version();
  }
}

}  // namespace remat::nn
