// A checkpoint folder's manifest; see checkpoint_manifest.h. The sums are
// taken from the files as the disk holds them after they were written (not
// from the bytes meant to be written), so that the manifest vouches for what
// a resume will read.
#include "train/checkpoint_manifest.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/file_write.h"

namespace remat::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kFormat = "remat checkpoint manifest";
constexpr int64_t kVersion = 1;

std::string hex(uint32_t crc) { return fmt::format("{:08x}", crc); }

// A name the manifest may list: a file of the folder itself, not a path out of it.
bool plain_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

ManifestCheck damaged(std::string problem, const fs::path& file) {
  return {.status = ManifestStatus::Damaged, .problem = std::move(problem), .file = file.string()};
}

}  // namespace

uint32_t file_crc32(const std::string& path) {
  const std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  REMAT_CHECK(file != nullptr, "checkpoint manifest: cannot read '{}': {}", path, errno_text(errno));
  std::vector<unsigned char> buffer(size_t{1} << 20);
  uLong crc = crc32_z(0L, Z_NULL, 0);
  while (true) {
    const size_t n = std::fread(buffer.data(), 1, buffer.size(), file.get());
    crc = crc32_z(crc, buffer.data(), n);
    if (n < buffer.size()) break;
  }
  REMAT_CHECK(!std::ferror(file.get()), "checkpoint manifest: error while reading '{}': {}", path,
              errno_text(errno));
  return static_cast<uint32_t>(crc);
}

void write_manifest(const std::string& folder) {
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name != kManifestFile) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const std::string& name : names) {
    const fs::path path = fs::path(folder) / name;
    files.push_back({{"name", name}, {"size", fs::file_size(path)}, {"crc32", hex(file_crc32(path.string()))}});
  }
  const nlohmann::ordered_json manifest = {{"format", kFormat}, {"version", kVersion}, {"files", files}};
  write_file_atomically((fs::path(folder) / kManifestFile).string(), manifest.dump(2) + "\n");
}

ManifestCheck verify_manifest(const std::string& folder) {
  const fs::path path = fs::path(folder) / kManifestFile;
  std::error_code error;
  if (!fs::exists(path, error)) return {.status = ManifestStatus::Missing};
  nlohmann::json manifest;
  try {
    std::FILE* raw = std::fopen(path.c_str(), "rb");
    REMAT_CHECK(raw != nullptr, "cannot read it: {}", errno_text(errno));
    const std::unique_ptr<FILE, int (*)(FILE*)> file(raw, &std::fclose);
    manifest = nlohmann::json::parse(file.get());
  } catch (const std::exception& e) {
    return damaged(fmt::format("'{}' is unreadable ({}): the manifest is damaged", path.string(), e.what()), path);
  }
  const auto format = manifest.find("format");
  const auto files = manifest.find("files");
  if (!manifest.is_object() || format == manifest.end() || *format != kFormat || files == manifest.end() ||
      !files->is_array()) {
    return damaged(fmt::format("'{}' is not a manifest remat writes (no \"format\": \"{}\" or no \"files\" list): "
                               "the manifest is damaged", path.string(), kFormat), path);
  }
  std::vector<std::string> names;
  for (const nlohmann::json& entry : *files) {
    const bool well_formed = entry.is_object() && entry.contains("name") && entry["name"].is_string() &&
                             entry.contains("size") && entry["size"].is_number_unsigned() &&
                             entry.contains("crc32") && entry["crc32"].is_string() &&
                             plain_name(entry["name"].get<std::string>());
    if (!well_formed) {
      return damaged(fmt::format("'{}' lists a file as {}, not {{\"name\", \"size\", \"crc32\"}}: the manifest is "
                                 "damaged", path.string(), entry.dump()), path);
    }
    names.push_back(entry["name"].get<std::string>());
    const fs::path file = fs::path(folder) / entry["name"].get<std::string>();
    if (!fs::is_regular_file(file, error)) {
      return damaged(fmt::format("'{}' is missing ('{}' lists it)", file.string(), path.string()), file);
    }
    const auto size = entry["size"].get<uint64_t>();
    const uintmax_t on_disk = fs::file_size(file, error);
    if (error || on_disk != size) {
      return damaged(fmt::format("'{}' is {} bytes, '{}' says {} (one of them was truncated or changed)",
                                 file.string(), error ? std::string("unreadable") : std::to_string(on_disk),
                                 path.string(), size), file);
    }
    std::string crc;
    try {
      crc = hex(file_crc32(file.string()));
    } catch (const Error& e) {
      return damaged(e.what(), file);  // "cannot read '...': Permission denied (EACCES)"
    }
    if (crc != entry["crc32"].get<std::string>()) {
      return damaged(fmt::format("'{}' has CRC-32 {}, '{}' says {} (one of them changed since it was written)",
                                 file.string(), crc, path.string(), entry["crc32"].get<std::string>()), file);
    }
  }
  return {.status = ManifestStatus::Verified, .files = std::move(names)};
}

}  // namespace remat::train
