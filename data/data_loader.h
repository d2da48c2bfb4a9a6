// Dataset and DataLoader: a pair of row-aligned tensors and the batches an
// epoch draws from them. The loader copies the rows of each batch into new
// contiguous tensors (shuffled or in order); it never touches autograd.
// Used by the training tasks in train/ and by the CLI.
//
//   data::DataLoader loader(dataset, {.batch_size = 128, .shuffle = true, .seed = 1});
//   for (int64_t e = 0; e < epochs; ++e)
//     for (const data::Batch& b : loader.epoch(e)) step(b.inputs, b.targets);
//
// The shuffle of epoch e is a permutation drawn from Philox with the seed as
// key and e in the counter: the same (seed, epoch) always gives the same
// order, and every epoch has its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace remat::data {

// inputs (N, ...) and targets (N, ...): row i of each is example i.
struct Dataset {
  Tensor inputs;
  Tensor targets;

  int64_t size() const { return inputs.size(0); }
};

struct Batch {
  Tensor inputs;   // (B, ...) contiguous copies of the chosen rows
  Tensor targets;  // (B, ...)
};
// The batch on `device` (itself where it is there already).
Batch to(const Batch& batch, Device device);

struct LoaderOptions {
  int64_t batch_size = 64;  // > 0
  bool shuffle = false;
  uint64_t seed = 0;
  bool drop_last = false;  // drop a last batch smaller than batch_size
  // Data parallelism (as torch's DistributedSampler): each of num_shards
  // ranks reads its own shard of every epoch's order, the rows at positions
  // shard, shard + num_shards, ... With the same seed on every rank the
  // shards are disjoint and cover the data; the order is padded by repeating
  // its first rows so that every shard has ceil(N / num_shards) rows.
  int64_t num_shards = 1;  // >= 1
  int64_t shard = 0;       // in [0, num_shards)
  // Where batches arrive: gathered on the CPU, then copied there (an
  // Accelerator's prepared loader sets its device).
  Device device = Device::cpu();
};

// Rows `rows` of `dataset` (in that order) as a dataset of their own, its
// bytes counted as Data: a subset for quick runs or a fixed evaluation set.
Dataset select_rows(const Dataset& dataset, const std::vector<int64_t>& rows);

class DataLoader {
 public:
  class Epoch;

  // Errors: batch_size <= 0, tensors with no rows axis, or inputs and
  // targets with different row counts. Non-contiguous tensors are copied once.
  DataLoader(Dataset dataset, LoaderOptions options);

  // Batches per epoch: ceil(R / batch_size), or floor(R / batch_size) with
  // drop_last, for R = shard_rows().
  int64_t size() const;
  // Rows this shard visits per epoch: ceil(N / num_shards) (N without shards).
  int64_t shard_rows() const;
  // Rows in batch `index` of an epoch (the last may be smaller).
  int64_t batch_rows(int64_t index) const;
  const Dataset& dataset() const { return dataset_; }
  const LoaderOptions& options() const { return options_; }

  // The order in which epoch `epoch` (>= 0) visits the rows: 0..N-1 without
  // shuffle, else a permutation of them fixed by (seed, epoch); with shards,
  // this shard's part of it.
  std::vector<int64_t> order(int64_t epoch) const;
  // The batches of one epoch, gathered one at a time as the loop advances.
  Epoch epoch(int64_t epoch) const;
  // Rows `rows` of the dataset, gathered into one batch.
  Batch gather(const std::vector<int64_t>& rows) const;

 private:
  std::vector<int64_t> shard_of(const std::vector<int64_t>& rows) const;

  Dataset dataset_;
  LoaderOptions options_;
};

// One pass over the data; an input range (each batch is built when the
// iterator reaches it, so only one is alive per loop iteration). An Epoch
// points at its loader, which must outlive it: loop over `loader.epoch(e)`
// of a named loader, not over `DataLoader(...).epoch(e)`.
class DataLoader::Epoch {
 public:
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = const Batch*;
    using reference = const Batch&;

    Iterator() = default;
    const Batch& operator*() const { return batch_; }
    const Batch* operator->() const { return &batch_; }
    Iterator& operator++();
    void operator++(int) { ++*this; }
    bool operator==(const Iterator& other) const { return index_ == other.index_; }

   private:
    friend class Epoch;
    Iterator(const Epoch* epoch, int64_t index);
    void load();

    const Epoch* epoch_ = nullptr;
    int64_t index_ = 0;
    Batch batch_;
  };

  Iterator begin() const { return Iterator(this, 0); }
  Iterator end() const { return Iterator(this, size()); }
  int64_t size() const { return loader_->size(); }
  // Batch `index` of this epoch (0 <= index < size()).
  Batch batch(int64_t index) const;

 private:
  friend class DataLoader;
  Epoch(const DataLoader* loader, std::vector<int64_t> order) : loader_(loader), order_(std::move(order)) {}

  const DataLoader* loader_;
  std::vector<int64_t> order_;
};

}  // namespace remat::data
