// The loader keeps the dataset contiguous so that a batch is one memcpy per
// row, whatever the dtype and row shape. The shuffle is Fisher-Yates driven
// by Philox (engine/rng.h): a pure function of (seed, epoch, step), so it
// needs no generator state and an epoch can be replayed on its own, e.g.
// after resuming from a checkpoint.
#include "data/data_loader.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "engine/allocator.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "engine/rng.h"

namespace remat::data {
namespace {

// Each epoch's draws use counters epoch * 2^40 + i: disjoint streams for
// datasets of up to 2^40 rows.
constexpr int kBitsPerEpoch = 40;

// A uniform integer in [0, bound) from 64 random bits (multiply-shift; the
// bias is below bound / 2^64, far under anything a dataset could show).
uint64_t below(uint64_t bound, uint64_t bits) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * bound) >> 64);
}

}  // namespace

DataLoader::DataLoader(Dataset dataset, LoaderOptions options) : dataset_(std::move(dataset)), options_(options) {
  REMAT_CHECK(options_.batch_size > 0, "DataLoader: batch_size is {}, it must be positive", options_.batch_size);
  REMAT_CHECK(dataset_.inputs.defined() && dataset_.targets.defined(), "DataLoader: dataset has an undefined tensor");
  REMAT_CHECK(dataset_.inputs.dim() >= 1 && dataset_.targets.dim() >= 1,
              "DataLoader: inputs {} and targets {} need a leading rows axis", dataset_.inputs.str(),
              dataset_.targets.str());
  REMAT_CHECK(dataset_.inputs.size(0) == dataset_.targets.size(0),
              "DataLoader: inputs {} and targets {} have different numbers of rows", dataset_.inputs.str(),
              dataset_.targets.str());
  REMAT_CHECK(dataset_.inputs.device().is_cpu() && dataset_.targets.device().is_cpu(),
              "DataLoader: the dataset must be on the CPU (inputs {}, targets {})", dataset_.inputs.str(),
              dataset_.targets.str());
  REMAT_CHECK(options_.num_shards >= 1 && options_.shard >= 0 && options_.shard < options_.num_shards,
              "DataLoader: shard {} of {} shards; need num_shards >= 1 and 0 <= shard < num_shards", options_.shard,
              options_.num_shards);
  // Copies, not views: gather() reads rows as bytes from the start of storage.
  if (!dataset_.inputs.is_contiguous()) dataset_.inputs = contiguous_copy(dataset_.inputs);
  if (!dataset_.targets.is_contiguous()) dataset_.targets = contiguous_copy(dataset_.targets);
}

int64_t DataLoader::shard_rows() const {
  return (dataset_.size() + options_.num_shards - 1) / options_.num_shards;
}

int64_t DataLoader::batch_rows(int64_t index) const {
  REMAT_CHECK(index >= 0 && index < size(), "DataLoader: batch {} of an epoch of {} batches", index, size());
  return std::min(options_.batch_size, shard_rows() - index * options_.batch_size);
}

int64_t DataLoader::size() const {
  const int64_t n = shard_rows();
  return options_.drop_last ? n / options_.batch_size : (n + options_.batch_size - 1) / options_.batch_size;
}

std::vector<int64_t> DataLoader::order(int64_t epoch) const {
  REMAT_CHECK(epoch >= 0, "DataLoader: epoch {} is negative", epoch);
  const int64_t n = dataset_.size();
  std::vector<int64_t> rows(static_cast<size_t>(n));
  std::iota(rows.begin(), rows.end(), int64_t{0});
  if (!options_.shuffle) return shard_of(rows);
  // Fisher-Yates from the back: swap row i with a uniform j in [0, i].
  const uint64_t base = static_cast<uint64_t>(epoch) << kBitsPerEpoch;
  for (int64_t i = n - 1; i > 0; --i) {
    const auto words = philox4x32(options_.seed, base + static_cast<uint64_t>(i));
    const uint64_t bits = (static_cast<uint64_t>(words[0]) << 32) | words[1];
    std::swap(rows[i], rows[below(static_cast<uint64_t>(i) + 1, bits)]);
  }
  return shard_of(rows);
}

std::vector<int64_t> DataLoader::shard_of(const std::vector<int64_t>& rows) const {
  if (options_.num_shards == 1) return rows;
  std::vector<int64_t> shard;
  shard.reserve(static_cast<size_t>(shard_rows()));
  const auto n = static_cast<int64_t>(rows.size());
  for (int64_t k = 0; k < shard_rows(); ++k) {
    const int64_t position = k * options_.num_shards + options_.shard;
    if (n > 0) shard.push_back(rows[static_cast<size_t>(position % n)]);  // past the end: padding from the start
  }
  return shard;
}

DataLoader::Epoch DataLoader::epoch(int64_t epoch) const { return Epoch(this, order(epoch)); }

Batch DataLoader::gather(const std::vector<int64_t>& rows) const {
  const int64_t n = dataset_.size();
  auto take = [&](const Tensor& source) {
    Shape shape = source.shape();
    shape[0] = static_cast<int64_t>(rows.size());
    Tensor out(shape, source.dtype());  // (B, ...)
    const size_t row_bytes = n == 0 ? 0 : source.nbytes() / static_cast<size_t>(n);
    const char* src = static_cast<const char*>(source.raw_data());
    char* dst = static_cast<char*>(out.raw_data());
    for (size_t b = 0; b < rows.size(); ++b) {
      REMAT_CHECK(rows[b] >= 0 && rows[b] < n, "DataLoader: row {} is outside a dataset of {} rows", rows[b], n);
      std::memcpy(dst + b * row_bytes, src + rows[b] * row_bytes, row_bytes);
    }
    return out;
  };
  return to(Batch{take(dataset_.inputs), take(dataset_.targets)}, options_.device);
}

Batch to(const Batch& batch, Device device) {
  return {remat::to(batch.inputs, device), remat::to(batch.targets, device)};
}

Batch DataLoader::Epoch::batch(int64_t index) const {
  REMAT_CHECK(index >= 0 && index < size(), "DataLoader: batch {} of an epoch of {} batches", index, size());
  const int64_t batch_size = loader_->options().batch_size;
  const int64_t first = index * batch_size;
  const int64_t last = std::min<int64_t>(first + batch_size, static_cast<int64_t>(order_.size()));
  return loader_->gather(std::vector<int64_t>(order_.begin() + first, order_.begin() + last));
}

DataLoader::Epoch::Iterator::Iterator(const Epoch* epoch, int64_t index) : epoch_(epoch), index_(index) { load(); }

DataLoader::Epoch::Iterator& DataLoader::Epoch::Iterator::operator++() {
  ++index_;
  load();
  return *this;
}

void DataLoader::Epoch::Iterator::load() {
  batch_ = index_ < epoch_->size() ? epoch_->batch(index_) : Batch{};
}

Dataset select_rows(const Dataset& dataset, const std::vector<int64_t>& rows) {
  for (size_t i = 0; i < rows.size(); ++i) {
    REMAT_CHECK(rows[i] >= 0 && rows[i] < dataset.size(), "select_rows: row {} (index {}) is outside a dataset of "
                "{} rows", rows[i], i, dataset.size());
  }
  CategoryGuard data(MemoryCategory::Data);
  Batch batch = DataLoader(dataset, {.batch_size = std::max<int64_t>(1, static_cast<int64_t>(rows.size()))}).gather(rows);
  return {std::move(batch.inputs), std::move(batch.targets)};
}

}  // namespace remat::data
