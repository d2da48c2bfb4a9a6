// Reads IDX files through zlib's gz* functions, which also read an
// uncompressed file as it is. Every check names the file and the values that
// were wrong, because a truncated download or a swapped path is the usual
// cause and the user must see which file it was.
#include "data/fashion_mnist.h"

#include "engine/allocator.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <vector>

#include "engine/error.h"

namespace remat::data {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension

// An open gzip file, closed when it goes out of scope.
class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path) {
    REMAT_CHECK(std::filesystem::exists(path),
                "Fashion-MNIST file {} not found; install the dataset with `apt-get install dataset-fashion-mnist`",
                path);
    file_ = gzopen(path.c_str(), "rb");
    REMAT_CHECK(file_ != nullptr, "cannot open {}: {}", path, std::strerror(errno));
  }
  ~GzFile() { gzclose(file_); }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  // Reads up to `nbytes`; returns how many came (fewer only at end of file).
  int64_t read(void* out, int64_t nbytes) {
    int64_t done = 0;
    while (done < nbytes) {
      // gzread takes an unsigned int count, so large reads go in chunks.
      const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(nbytes - done, 1 << 30));
      const int got = gzread(file_, static_cast<char*>(out) + done, chunk);
      if (got < 0) {
        int code = 0;
        const char* message = gzerror(file_, &code);
        REMAT_FAIL("{}: corrupt gzip data (zlib: {})", path_, message);
      }
      if (got == 0) break;
      done += got;
    }
    offset_ += done;
    return done;
  }

  // Reads exactly `nbytes` of `what`, or fails naming how many were missing.
  void read_exact(void* out, int64_t nbytes, std::string_view what) {
    const int64_t start = offset_;
    const int64_t got = read(out, nbytes);
    REMAT_CHECK(got == nbytes, "{} is truncated: expected {} bytes of {} at byte {}, found {}", path_, nbytes, what,
                start, got);
  }

  // Big-endian uint32 of the header.
  uint32_t read_u32(std::string_view what) {
    std::array<unsigned char, 4> b{};
    read_exact(b.data(), 4, what);
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
  }

  // Reads exactly `nbytes` of `what` into a buffer that grows with the bytes
  // that arrive, at most kChunk at a time: a header that declares more than
  // the file holds fails as truncated, having allocated about what the file
  // holds rather than what it declares (2^31 images are 1.7 TB).
  std::vector<unsigned char> read_declared(int64_t nbytes, std::string_view what) {
    constexpr int64_t kChunk = int64_t{16} << 20;
    const int64_t start = offset_;
    std::vector<unsigned char> out;
    while (static_cast<int64_t>(out.size()) < nbytes) {
      const int64_t have = static_cast<int64_t>(out.size());
      const int64_t want = std::min(nbytes - have, kChunk);
      out.resize(static_cast<size_t>(have + want));
      const int64_t got = read(out.data() + have, want);
      REMAT_CHECK(got == want, "{} is truncated: expected {} bytes of {} at byte {}, found {}", path_, nbytes, what,
                  start, have + got);
    }
    return out;
  }

  // Fails when anything follows the data the header declared.
  void expect_end(int64_t declared) {
    char extra = 0;
    REMAT_CHECK(read(&extra, 1) == 0, "{} has more bytes than its header declares ({} bytes in all)", path_,
                declared);
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
  int64_t offset_ = 0;
};

void check_magic(const std::string& path, uint32_t magic, uint32_t expected, std::string_view kind) {
  REMAT_CHECK(magic == expected, "{}: magic number 0x{:08x}, expected 0x{:08x} for an IDX {} file", path, magic,
              expected, kind);
}

}  // namespace

Tensor read_idx_images(const std::string& path, int64_t expected_rows, int64_t expected_cols) {
  GzFile file(path);
  check_magic(path, file.read_u32("the magic number"), kImagesMagic, "images (unsigned bytes, 3 dimensions)");
  const int64_t count = file.read_u32("the image count");
  const int64_t rows = file.read_u32("the row count");
  const int64_t cols = file.read_u32("the column count");
  REMAT_CHECK(rows == expected_rows && cols == expected_cols, "{}: images are {} x {}, expected {} x {}", path, rows,
              cols, expected_rows, expected_cols);
  // Counts are uint32 in the header; a corrupt one must not ask for terabytes.
  REMAT_CHECK(count <= INT32_MAX, "{}: image count {} is not a plausible count", path, count);

  const int64_t pixels = rows * cols;
  const std::vector<unsigned char> bytes =  // (N, rows*cols)
      file.read_declared(count * pixels, fmt::format("{} images of {} x {}", count, rows, cols));
  file.expect_end(16 + count * pixels);

  Tensor images({count, pixels}, DType::Float32);  // (N, rows*cols)
  float* out = images.data<float>();
  for (size_t i = 0; i < bytes.size(); ++i) out[i] = static_cast<float>(bytes[i]) / 255.0f;
  return images;
}

Tensor read_idx_labels(const std::string& path, int64_t num_classes) {
  GzFile file(path);
  check_magic(path, file.read_u32("the magic number"), kLabelsMagic, "labels (unsigned bytes, 1 dimension)");
  const int64_t count = file.read_u32("the label count");
  REMAT_CHECK(count <= INT32_MAX, "{}: label count {} is not a plausible count", path, count);

  const std::vector<unsigned char> bytes = file.read_declared(count, fmt::format("{} labels", count));  // (N)
  file.expect_end(8 + count);

  Tensor labels({count}, DType::Int64);  // (N)
  int64_t* out = labels.data<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    REMAT_CHECK(bytes[i] < num_classes, "{}: label {} of item {} is outside 0..{}", path, int{bytes[i]}, i,
                num_classes - 1);
    out[i] = bytes[i];
  }
  return labels;
}

Dataset load_fashion_mnist(std::string_view split, const std::string& dir) {
  REMAT_CHECK(split == "train" || split == "test", "load_fashion_mnist: split \"{}\", expected \"train\" or \"test\"",
              split);
  const std::string prefix = split == "train" ? "train" : "t10k";
  const std::string images_path = (std::filesystem::path(dir) / (prefix + "-images-idx3-ubyte.gz")).string();
  const std::string labels_path = (std::filesystem::path(dir) / (prefix + "-labels-idx1-ubyte.gz")).string();
  // Check both files before reading either, so a missing package fails fast.
  for (const std::string& path : {images_path, labels_path}) {
    REMAT_CHECK(std::filesystem::exists(path),
                "Fashion-MNIST file {} not found; install the dataset with `apt-get install dataset-fashion-mnist`",
                path);
  }
  CategoryGuard data_bytes(MemoryCategory::Data);
  Dataset dataset{read_idx_images(images_path), read_idx_labels(labels_path)};
  REMAT_CHECK(dataset.inputs.size(0) == dataset.targets.size(0), "Fashion-MNIST {}: {} has {} images but {} has {} labels",
              split, images_path, dataset.inputs.size(0), labels_path, dataset.targets.size(0));
  return dataset;
}

}  // namespace remat::data
