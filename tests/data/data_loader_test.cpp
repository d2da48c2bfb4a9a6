// DataLoader: batch counts, every row exactly once per epoch, reproducible
// and per-epoch shuffles, batch contents equal to the dataset's rows, errors.
#include "data/data_loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/factory.h"

namespace remat::data {
namespace {

// n rows: inputs (n, 3) with row i = [10i, 10i+1, 10i+2], targets (n) = i.
Dataset numbered(int64_t n) {
  std::vector<float> inputs;
  std::vector<int64_t> targets;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < 3; ++j) inputs.push_back(static_cast<float>(10 * i + j));
    targets.push_back(i);
  }
  return Dataset{from_vector(inputs, {n, 3}), from_vector(targets, {n})};
}

// The targets of an epoch's batches, in order, and the batch sizes.
std::vector<int64_t> visited(const DataLoader& loader, int64_t epoch, std::vector<int64_t>* sizes = nullptr) {
  std::vector<int64_t> rows;
  for (const Batch& b : loader.epoch(epoch)) {
    const std::vector<int64_t> t = b.targets.to_vector<int64_t>();
    rows.insert(rows.end(), t.begin(), t.end());
    if (sizes) sizes->push_back(b.targets.size(0));
  }
  return rows;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

TEST(DataLoader, BatchCount) {
  const Dataset d = numbered(10);
  EXPECT_EQ(DataLoader(d, {.batch_size = 3}).size(), 4);
  EXPECT_EQ(DataLoader(d, {.batch_size = 3, .drop_last = true}).size(), 3);
  EXPECT_EQ(DataLoader(d, {.batch_size = 5}).size(), 2);
  EXPECT_EQ(DataLoader(d, {.batch_size = 5, .drop_last = true}).size(), 2);
  EXPECT_EQ(DataLoader(d, {.batch_size = 20}).size(), 1);
  EXPECT_EQ(DataLoader(d, {.batch_size = 20, .drop_last = true}).size(), 0);
  EXPECT_EQ(DataLoader(numbered(0), {.batch_size = 4}).size(), 0);
}

TEST(DataLoader, IteratesSizeBatchesOfTheRightSizes) {
  const DataLoader loader(numbered(10), {.batch_size = 3});
  std::vector<int64_t> sizes;
  visited(loader, 0, &sizes);
  EXPECT_EQ(sizes, (std::vector<int64_t>{3, 3, 3, 1}));
  sizes.clear();
  const DataLoader dropping(numbered(10), {.batch_size = 3, .shuffle = true, .drop_last = true});
  const std::vector<int64_t> rows = visited(dropping, 0, &sizes);
  EXPECT_EQ(sizes, (std::vector<int64_t>{3, 3, 3}));
  std::vector<int64_t> sorted = rows;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());  // 9 distinct rows
  const DataLoader::Epoch epoch = loader.epoch(0);
  EXPECT_EQ(epoch.size(), 4);
  EXPECT_EQ(std::distance(epoch.begin(), epoch.end()), 4);
}

TEST(DataLoader, WithoutShuffleRowsComeInOrder) {
  const DataLoader loader(numbered(7), {.batch_size = 2});
  EXPECT_EQ(visited(loader, 0), iota(7));
  EXPECT_EQ(visited(loader, 5), iota(7));
  EXPECT_EQ(loader.order(3), iota(7));
}

TEST(DataLoader, ShuffleVisitsEveryRowExactlyOncePerEpoch) {
  for (int64_t batch_size : {1, 7, 32, 100, 1000}) {
    const DataLoader loader(numbered(100), {.batch_size = batch_size, .shuffle = true, .seed = 42});
    for (int64_t epoch = 0; epoch < 4; ++epoch) {
      std::vector<int64_t> rows = visited(loader, epoch);
      EXPECT_EQ(rows, loader.order(epoch));
      EXPECT_NE(rows, iota(100)) << "epoch " << epoch << " was not shuffled";
      std::sort(rows.begin(), rows.end());
      EXPECT_EQ(rows, iota(100)) << "batch_size " << batch_size << " epoch " << epoch;
    }
  }
}

TEST(DataLoader, SameSeedSameOrder) {
  const DataLoader a(numbered(50), {.batch_size = 8, .shuffle = true, .seed = 7});
  const DataLoader b(numbered(50), {.batch_size = 8, .shuffle = true, .seed = 7});
  for (int64_t epoch : {0, 1, 9}) {
    EXPECT_EQ(visited(a, epoch), visited(b, epoch));
    EXPECT_EQ(visited(a, epoch), visited(a, epoch));  // asking twice changes nothing
  }
  const DataLoader c(numbered(50), {.batch_size = 8, .shuffle = true, .seed = 8});
  EXPECT_NE(visited(a, 0), visited(c, 0));
}

TEST(DataLoader, EachEpochHasItsOwnOrder) {
  const DataLoader loader(numbered(50), {.batch_size = 8, .shuffle = true, .seed = 7});
  std::vector<std::vector<int64_t>> orders;
  for (int64_t epoch = 0; epoch < 5; ++epoch) orders.push_back(loader.order(epoch));
  for (size_t i = 0; i < orders.size(); ++i)
    for (size_t j = i + 1; j < orders.size(); ++j) EXPECT_NE(orders[i], orders[j]) << "epochs " << i << " and " << j;
}

TEST(DataLoader, BatchesHoldContiguousCopiesOfTheRows) {
  const Dataset d = numbered(10);
  const DataLoader loader(d, {.batch_size = 4, .shuffle = true, .seed = 3});
  for (const Batch& b : loader.epoch(2)) {
    ASSERT_EQ(b.inputs.dim(), 2);
    EXPECT_EQ(b.inputs.size(1), 3);
    EXPECT_EQ(b.inputs.size(0), b.targets.size(0));
    EXPECT_TRUE(b.inputs.is_contiguous());
    EXPECT_TRUE(b.targets.is_contiguous());
    EXPECT_EQ(b.inputs.dtype(), DType::Float32);
    EXPECT_EQ(b.targets.dtype(), DType::Int64);
    EXPECT_NE(b.inputs.storage(), d.inputs.storage());
    const std::vector<float> x = b.inputs.to_vector<float>();
    const std::vector<int64_t> y = b.targets.to_vector<int64_t>();
    for (size_t r = 0; r < y.size(); ++r)
      for (size_t j = 0; j < 3; ++j) EXPECT_EQ(x[r * 3 + j], static_cast<float>(10 * y[r] + static_cast<int64_t>(j)));
  }
  // Writing into a batch leaves the dataset alone.
  const Batch b = loader.epoch(0).batch(0);
  b.inputs.data<float>()[0] = -1.0f;
  EXPECT_EQ(d.inputs.to_vector<float>(), numbered(10).inputs.to_vector<float>());
}

TEST(DataLoader, GathersRowsOfAnyShapeAndLayout) {
  // inputs (4, 2, 2) and targets (4, 2); the inputs are a transposed view.
  const Tensor base = from_vector(std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {2, 2, 4});
  const Tensor inputs = base.alias({4, 2, 2}, {1, 8, 4}, 0);  // inputs[i][a][b] = base[a][b][i]
  const Tensor targets = from_vector(std::vector<int64_t>{0, 100, 1, 101, 2, 102, 3, 103}, {4, 2});
  const DataLoader loader(Dataset{inputs, targets}, {.batch_size = 3});
  const Batch b = loader.gather({3, 0});
  EXPECT_EQ(b.inputs.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(b.inputs.to_vector<double>(), (std::vector<double>{3, 7, 11, 15, 0, 4, 8, 12}));
  EXPECT_EQ(b.targets.to_vector<int64_t>(), (std::vector<int64_t>{3, 103, 0, 100}));
}

TEST(DataLoader, ShardsAreDisjointCoverTheDataAndAreEqualInSize) {
  // 10 rows over 4 shards: 3 rows each, the order padded with its first 2 rows.
  const Dataset d = numbered(10);
  std::vector<int64_t> seen;
  for (int64_t shard = 0; shard < 4; ++shard) {
    const DataLoader loader(d, {.batch_size = 2, .shuffle = true, .seed = 9, .num_shards = 4, .shard = shard});
    EXPECT_EQ(loader.shard_rows(), 3);
    EXPECT_EQ(loader.size(), 2);
    EXPECT_EQ(loader.batch_rows(0), 2);
    EXPECT_EQ(loader.batch_rows(1), 1);
    const std::vector<int64_t> order = loader.order(1);
    ASSERT_EQ(order.size(), 3u);
    seen.insert(seen.end(), order.begin(), order.end());
  }
  // Shard s holds positions s, s + 4, s + 8 of the whole epoch's order.
  const std::vector<int64_t> whole = DataLoader(d, {.batch_size = 2, .shuffle = true, .seed = 9}).order(1);
  for (int64_t shard = 0; shard < 4; ++shard) {
    for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(seen[shard * 3 + k], whole[(k * 4 + shard) % 10]);
  }
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  EXPECT_EQ(seen.size(), 10u);  // every row, the two padding rows twice
}

TEST(DataLoader, Errors) {
  const Dataset d = numbered(5);
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message([&] { DataLoader(d, {.batch_size = 0}); }).find("batch_size is 0"), std::string::npos);
  EXPECT_NE(message([&] { DataLoader(d, {.batch_size = -3}); }).find("batch_size is -3"), std::string::npos);
  const Dataset mismatched{d.inputs, from_vector(std::vector<int64_t>{0, 1, 2}, {3})};
  const std::string rows = message([&] { DataLoader(mismatched, {.batch_size = 2}); });
  EXPECT_NE(rows.find("(5, 3)"), std::string::npos) << rows;
  EXPECT_NE(rows.find("(3)"), std::string::npos) << rows;
  const DataLoader loader(d, {.batch_size = 2});
  EXPECT_NE(message([&] { loader.order(-1); }).find("epoch -1"), std::string::npos);
  EXPECT_NE(message([&] { loader.epoch(0).batch(3); }).find("batch 3 of an epoch of 3 batches"), std::string::npos);
  EXPECT_NE(message([&] { loader.gather({5}); }).find("row 5"), std::string::npos);
  EXPECT_NE(message([&] { DataLoader(d, {.num_shards = 2, .shard = 2}); }).find("shard 2 of 2 shards"),
            std::string::npos);
}

}  // namespace
}  // namespace remat::data
