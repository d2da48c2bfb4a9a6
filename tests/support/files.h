// Test support: whole files read and written, and fresh paths in the
// temporary folder.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace remat::testing {

// The bytes of `path` ("" where it cannot be read).
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// `name` in the temporary folder, with nothing there yet.
inline std::string temp_folder(const std::string& name) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(path);
  return path.string();
}

// `text` written to `name` in the temporary folder; its path.
inline std::string write_text(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

}  // namespace remat::testing
