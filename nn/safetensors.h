// Safetensors: a module's named parameters to and from a .safetensors file,
// the format of Hugging Face's `safetensors` library, so that weights move
// between remat, PyTorch and NumPy. Checkpoints of a whole training run
// (optimizer state, step) are train/'s business; this file holds tensors only.
//
//   save_safetensors(model, "mlp.safetensors", {{"step", "1000"}});
//   load_safetensors(model, "mlp.safetensors");   // all or nothing
//
// The format: an 8-byte little-endian header length N, N bytes of JSON
//   {"layers.0.weight": {"dtype": "F32", "shape": [256, 784], "data_offsets": [0, 802816]},
//    ..., "__metadata__": {"step": "1000"}}
// padded with spaces so that 8 + N is a multiple of 8, then the body: every
// tensor's raw little-endian bytes, row-major, at its [begin, end) offsets
// (relative to the body). The tensors tile the body: no gaps, no overlaps.
// Supported dtypes: F32, F64, I64 and BF16 (read and written as they are;
// loading widens BF16 into a float32 or float64 model when asked: `widen`);
// F16 and the others are reported as not yet supported.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/file_write.h"
#include "engine/tensor.h"
#include "nn/module.h"

namespace remat::nn {

// The "__metadata__" map of a file: free-form string keys and values.
using SafetensorsMetadata = std::map<std::string, std::string>;

struct SafetensorsLoadOptions {
  // Tensors in the file that name no parameter of the model are an error
  // unless this is set (e.g. loading a backbone from a larger model's file).
  bool allow_unused = false;
  // The parameter a tensor of the file goes to, by its name in the file
  // ("" leaves the tensor out); unset: the same name. Two tensors renamed
  // to one parameter are an error.
  std::function<std::string(const std::string&)> rename;
  // A tensor of the file whose dtype widens exactly into its parameter's
  // goes to it converted (BF16 to float32 or float64, F32 to float64);
  // unset, or for any other pair (F64 into float32), dtypes must agree.
  bool widen = false;
};

// One tensor of a file's header: its dtype and shape.
struct SafetensorsEntry {
  std::string name;
  DType dtype;
  Shape shape;
};

// Writes `tensors` in the given order to `path`, whole or not at all
// (engine/file_write.h: a temporary name of this write alone, flushed and
// renamed onto `path` when complete), so a crash or a full disk never leaves
// a half-written file under `path`, and two writers of one path never mix
// their files. Names must be unique, non-empty and not "__metadata__";
// tensors must be defined, with dtype float32, float64, int64 or bfloat16
// (a GPU's tensors are copied to the CPU, strided views are written dense).
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const SafetensorsMetadata& metadata = {});
// The same bytes into `file`, not committed: a writer of several files
// (a sharded checkpoint) writes them all before it renames any.
void write_safetensors(AtomicFile& file, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const SafetensorsMetadata& metadata = {});

// Every tensor of the file at `path`, in header order, as new contiguous CPU
// tensors with no autograd history. The whole file is validated first; any
// defect (bad header length or JSON, duplicate names, unknown dtype, offsets
// that disagree with the shape or leave the body, truncated body) throws
// remat::Error naming the file, the tensor and the values found.
std::vector<std::pair<std::string, Tensor>> read_safetensors(const std::string& path);
// The "__metadata__" map of the file (empty when it has none), validated as above.
SafetensorsMetadata read_safetensors_metadata(const std::string& path);
// The header's tensors, in header order, validated against the file's size
// (the body itself is not read: cheap on a large file).
std::vector<SafetensorsEntry> read_safetensors_header(const std::string& path);

// write_safetensors(path, module.named_parameters(), metadata).
void save_safetensors(const Module& module, const std::string& path, const SafetensorsMetadata& metadata = {});

// Copies the file's tensors into module's parameters of the same names. All or
// nothing: the file and its agreement with the model (every parameter present,
// same dtype, same shape; no unused names unless options.allow_unused) are
// checked before the first byte is copied, so on error every parameter keeps
// its value. The copy runs under NoGradGuard and bumps each parameter
// storage's version (it is an in-place write).
void load_safetensors(Module& module, const std::string& path, SafetensorsLoadOptions options = {});
// The same from the union of several files (a sharded checkpoint), still all
// or nothing; a name in two of them is an error naming both. Every file is
// read whole before the first copy.
void load_safetensors(Module& module, const std::vector<std::string>& paths, SafetensorsLoadOptions options = {});

}  // namespace remat::nn
