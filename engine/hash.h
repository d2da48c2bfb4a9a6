// FNV-1a, 64-bit: a graph's signature (scheduler/profile.cpp), a run's text
// (data::fingerprint) and the settings ranks compare (train/rank_agreement.cpp)
// hash with it. Not for security, nor for tables an adversary fills.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace remat {

inline constexpr uint64_t kFnv1aOffsetBasis = 14695981039346656037ull;

// Mixes `size` bytes at `data` into `hash`.
inline void fnv1a(uint64_t& hash, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;  // FNV's 64-bit prime
  }
}

inline uint64_t fnv1a(std::string_view bytes) {
  uint64_t hash = kFnv1aOffsetBasis;
  fnv1a(hash, bytes.data(), bytes.size());
  return hash;
}

}  // namespace remat
