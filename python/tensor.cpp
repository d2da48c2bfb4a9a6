// remat.Tensor and the ops, with autograd (bindings.h). A Tensor goes to
// NumPy without a copy (Tensor.numpy(), __array__: the array shares the
// tensor's storage and keeps it alive); from NumPy it is copied once, since
// every byte remat computes on is counted by its allocator (category data).
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/autograd.h"
#include "engine/factory.h"
#include "engine/rng.h"
#include "ops/attention.h"
#include "ops/binary.h"
#include "ops/dropout.h"
#include "ops/layer_norm.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "ops/unary.h"
#include "python/bindings.h"
#include "python/convert.h"

namespace remat::python {
namespace {

using Array = nb::ndarray<nb::numpy, nb::device::cpu>;

DType dtype_named(const std::string& name) {
  if (name == "float32") return DType::Float32;
  if (name == "float64") return DType::Float64;
  if (name == "int64") return DType::Int64;
  REMAT_FAIL("dtype '{}': remat has float32, float64 and int64", name);
}

nb::dlpack::dtype numpy_dtype(DType dtype) {
  switch (dtype) {
    case DType::Float32: return nb::dtype<float>();
    case DType::Float64: return nb::dtype<double>();
    case DType::Int64: return nb::dtype<int64_t>();
    default: REMAT_FAIL("{} has no NumPy dtype here", dtype_name(dtype));
  }
}

DType dtype_of(const nb::dlpack::dtype& dtype, const char* what) {
  if (dtype == nb::dtype<float>()) return DType::Float32;
  if (dtype == nb::dtype<double>()) return DType::Float64;
  if (dtype == nb::dtype<int64_t>()) return DType::Int64;
  REMAT_FAIL("{}: NumPy dtype with code {} and {} bits is not one of float32, float64, int64 (convert with "
             "array.astype)", what, static_cast<int>(dtype.code), static_cast<int>(dtype.bits));
}

// The array's values in a new tensor (a copy: remat's bytes are its
// allocator's), of category data.
Tensor from_numpy(nb::ndarray<nb::numpy, nb::device::cpu, nb::c_contig> array, bool requires_grad) {
  const DType ours = dtype_of(array.dtype(), "tensor");
  Shape shape;
  for (size_t i = 0; i < array.ndim(); ++i) shape.push_back(static_cast<int64_t>(array.shape(i)));
  Tensor t;
  {
    CategoryGuard data(MemoryCategory::Data);
    t = empty(shape, ours);
  }
  if (t.nbytes() > 0 && !t.device().is_meta()) std::memcpy(t.raw_data(), array.data(), t.nbytes());  // meta: no bytes
  if (requires_grad) t.requires_grad_();
  return t;
}

// Why a NumPy array cannot be shared as it is.
std::string unshareable(nb::handle object) {
  const nb::object flags = object.attr("flags");
  if (!nb::cast<bool>(flags.attr("writeable"))) return "it is read-only";
  if (!nb::cast<bool>(object.attr("dtype").attr("isnative"))) return "its byte order is not this machine's";
  if (!nb::cast<bool>(flags.attr("aligned"))) return "its data is not aligned to its dtype";
  return "its strides are not whole elements";
}

// What a shared array's storage holds: the array, and its export to C++.
// Let go of with the GIL. A tensor kept in a global can close a cycle
// through C++ that the collector cannot see (tensor -> array -> its class,
// when a subclass of ndarray -> the globals of its module -> tensor): at
// exit, forget_all() lets go of every array first, as the observers do.
struct NumpyOwner {
  nb::object array;
  nb::ndarray<nb::numpy, nb::device::cpu> exported;

  NumpyOwner() { live().insert(this); }
  ~NumpyOwner() { live().erase(this); }
  NumpyOwner(const NumpyOwner&) = delete;
  NumpyOwner& operator=(const NumpyOwner&) = delete;

  static void release(void* p) {
    auto* owner = static_cast<NumpyOwner*>(p);
    if (PyGILState_Check() != 0) {
      delete owner;
    } else if (Py_IsInitialized() && nb::is_alive()) {
      nb::gil_scoped_acquire gil;
      delete owner;
    }  // else: the interpreter has finished; nothing to hand back to
  }
  // Called at exit (atexit, with the GIL); tensors still alive then keep
  // their pointers but no longer their arrays.
  static void forget_all() {
    for (NumpyOwner* owner : std::set<NumpyOwner*>(live())) {
      owner->exported = {};
      owner->array.reset();
    }
  }

 private:
  static std::set<NumpyOwner*>& live() {  // touched with the GIL held
    static std::set<NumpyOwner*> owners;
    return owners;
  }
};

// The array's own memory as a tensor's (no copy, as torch.from_numpy): a
// write through either is seen by both (an optimizer's step changes the
// array). A write through NumPy bumps no version: one made after a
// backward saved the array goes unnoticed, and a replay reads it. The
// tensor holds the array; the allocator counts its bytes as data while the
// tensor lives (twice, if two tensors share one array). Shared as it is:
// any writable, aligned, native-order array of float32, float64 or int64
// whose strides are whole, non-negative elements.
Tensor share_numpy(nb::handle object, bool requires_grad) {
  const nb::handle ndarray_type = nb::module_::import_("numpy").attr("ndarray");
  REMAT_CHECK(PyObject_IsInstance(object.ptr(), ndarray_type.ptr()) == 1, "from_numpy: a NumPy array, not a {} "
              "(remat.tensor copies anything numpy.asarray takes)",
              nb::cast<std::string>(object.type().attr("__name__")));
  auto owner = std::make_unique<NumpyOwner>();
  owner->array = nb::borrow(object);
  REMAT_CHECK(nb::try_cast(object, owner->exported, /*convert=*/false), "from_numpy: the array cannot be shared: {} "
              "(remat.tensor copies it)", unshareable(object));
  const auto& array = owner->exported;
  const DType dtype = dtype_of(array.dtype(), "from_numpy");
  REMAT_CHECK(reinterpret_cast<uintptr_t>(array.data()) % dtype_size(dtype) == 0, "from_numpy: the array cannot be "
              "shared: its data is not aligned to its dtype (remat.tensor copies it)");
  Shape shape;
  Strides strides;
  int64_t last = 0;  // the last element's index from the first
  bool empty_array = false;
  for (size_t i = 0; i < array.ndim(); ++i) {
    const auto size = static_cast<int64_t>(array.shape(i));
    const int64_t stride = array.stride(i);
    REMAT_CHECK(stride >= 0, "from_numpy: dimension {} of the array steps backwards (stride {}); copy it with "
                "remat.tensor", i, stride);
    shape.push_back(size);
    strides.push_back(stride);
    empty_array = empty_array || size == 0;
    if (size > 0) last += (size - 1) * stride;
  }
  const size_t nbytes = empty_array ? 0 : static_cast<size_t>(last + 1) * dtype_size(dtype);
  void* data = array.data();
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(data, nbytes, MemoryCategory::Data,
                                            std::shared_ptr<void>(owner.release(), &NumpyOwner::release));
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = dtype;
  Tensor t(std::move(impl));
  if (requires_grad) t.requires_grad_();
  return t;
}

// The tensor's memory as a NumPy array (no copy); the array holds the tensor.
Array to_numpy(const Tensor& t) {
  REMAT_CHECK(t.defined(), "numpy: the tensor is undefined (it holds no storage)");
  REMAT_CHECK(t.device().is_cpu(), "numpy: {} is not on the CPU (move it with .to('cpu'))", t.str());
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
  auto* held = new Tensor(t.detach());
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  return Array(t.raw_data(), shape.size(), shape.data(), owner, strides.data(), numpy_dtype(t.dtype()));
}

std::optional<Tensor> grad_of(const Tensor& t) {
  const Tensor g = t.grad();
  if (!g.defined()) return std::nullopt;
  return g;
}

nb::tuple shape_of(const Tensor& t) {
  nb::list dims;
  for (int64_t d : t.shape()) dims.append(d);
  return nb::tuple(dims);
}

// `with remat.no_grad():` records nothing inside.
class NoGrad {
 public:
  void enter() { guard_ = std::make_unique<NoGradGuard>(); }
  void exit() { guard_.reset(); }

 private:
  std::unique_ptr<NoGradGuard> guard_;
};

// Tensor: its properties, autograd, NumPy and DLPack, and the operators.
void bind_tensor_class(nb::module_& m) {
  nb::class_<Tensor>(m, "Tensor", "A tensor with autograd: shape, dtype, device, grad, backward().")
      .def_prop_ro("shape", &shape_of)
      .def_prop_ro("dtype", [](const Tensor& t) { return std::string(dtype_name(t.dtype())); })
      .def_prop_ro("device", [](const Tensor& t) { return t.device().str(); })
      .def_prop_ro("ndim", &Tensor::dim)
      .def_prop_ro("is_leaf", &Tensor::is_leaf)
      .def_prop_rw("requires_grad", &Tensor::requires_grad,
                   [](Tensor& t, bool on) { t.requires_grad_(on); })
      .def_prop_rw("grad", &grad_of, [](Tensor& t, std::optional<Tensor> g) { t.set_grad(g.value_or(Tensor())); },
                   nb::arg("grad").none(), "the gradient backward() left here, or None (set None to clear it)")
      .def_prop_ro("grad_fn", [](const Tensor& t) -> std::optional<std::string> {
        if (!t.grad_fn()) return std::nullopt;
        return std::string(t.grad_fn()->name());
      }, "the op that made this tensor (its node in the graph), or None for a leaf")
      .def("requires_grad_", [](Tensor& t, bool on) -> Tensor& { return t.requires_grad_(on); },
           nb::arg("requires_grad") = true, nb::rv_policy::reference)
      .def("backward", [](const Tensor& t) { t.backward(); }, "the backward pass from this (one-element) tensor")
      .def("detach", &Tensor::detach)
      .def("to", [](const Tensor& t, const std::string& device) { return to(t, device_named(device)); },
           nb::arg("device"), "this tensor on `device` (cpu, cuda, cuda:N): itself if there already, else a copy")
      .def("item", [](const Tensor& t) { return t.item<double>(); })
      .def("numpy", &to_numpy, "the tensor's memory as a NumPy array (no copy)")
      // DLPack, through NumPy's: torch.from_dlpack(t) and numpy.from_dlpack(t) share the memory.
      .def("__dlpack__", [](nb::handle self, nb::kwargs kwargs) {
        return self.attr("numpy")().attr("__dlpack__")(**kwargs);
      }, "DLPack's capsule of the tensor's memory (CPU tensors; no copy)")
      .def("__dlpack_device__", [](const Tensor& t) {
        REMAT_CHECK(t.device().is_cpu(), "__dlpack__: {} is not on the CPU (move it with .to('cpu'))", t.str());
        return nb::make_tuple(1, 0);  // kDLCPU, device 0
      })
      .def("__array__", [](const Tensor& t, nb::handle, nb::handle) { return to_numpy(t); },
           nb::arg("dtype") = nb::none(), nb::arg("copy") = nb::none())
      .def("numel", &Tensor::numel)
      .def("__len__", [](const Tensor& t) { return t.dim() == 0 ? 0 : t.shape()[0]; })
      .def("__repr__", [](const Tensor& t) { return "remat.Tensor(" + t.str() + ")"; })
      .def("__add__", [](const Tensor& a, const Tensor& b) { return add(a, b); })
      .def("__add__", [](const Tensor& a, double b) { return add(a, b); })
      .def("__radd__", [](const Tensor& a, double b) { return add(a, b); })
      .def("__sub__", [](const Tensor& a, const Tensor& b) { return sub(a, b); })
      .def("__sub__", [](const Tensor& a, double b) { return sub(a, b); })
      .def("__rsub__", [](const Tensor& a, double b) { return sub(b, a); })
      .def("__mul__", [](const Tensor& a, const Tensor& b) { return mul(a, b); })
      .def("__mul__", [](const Tensor& a, double b) { return mul(a, b); })
      .def("__rmul__", [](const Tensor& a, double b) { return mul(a, b); })
      .def("__truediv__", [](const Tensor& a, const Tensor& b) { return div(a, b); })
      .def("__truediv__", [](const Tensor& a, double b) { return div(a, b); })
      .def("__rtruediv__", [](const Tensor& a, double b) { return div(b, a); })
      .def("__neg__", [](const Tensor& a) { return neg(a); })
      .def("__matmul__", [](const Tensor& a, const Tensor& b) { return matmul(a, b); })
      .def("sum", [](const Tensor& x, std::vector<int64_t> axes, bool keepdim) { return sum(x, axes, keepdim); },
           nb::arg("axes") = std::vector<int64_t>{}, nb::arg("keepdim") = false)
      .def("mean", [](const Tensor& x, std::vector<int64_t> axes, bool keepdim) { return mean(x, axes, keepdim); },
           nb::arg("axes") = std::vector<int64_t>{}, nb::arg("keepdim") = false)
      .def("reshape", [](const Tensor& x, std::vector<int64_t> shape) { return reshape(x, Shape(shape)); })
      .def("transpose", [](const Tensor& x, int64_t a, int64_t b) { return transpose(x, a, b); })
      .def("permute", [](const Tensor& x, std::vector<int64_t> axes) { return permute(x, axes); });
}

// Tensors from NumPy, constants, and random ones from a Generator.
void bind_factories(nb::module_& m) {
  m.def("_from_numpy", &from_numpy, nb::arg("array"), nb::arg("requires_grad") = false);
  nb::module_::import_("atexit").attr("register")(nb::cpp_function(&NumpyOwner::forget_all));
  m.def("from_numpy", &share_numpy, nb::arg("array"), nb::arg("requires_grad") = false,
        "the array's own memory as a tensor (no copy; a write through either is seen by both, and one through "
        "NumPy bumps no version), as torch.from_numpy: a writable, aligned, native-order array of float32, float64 "
        "or int64 with non-negative strides of whole elements");
  m.def("zeros", [](std::vector<int64_t> shape, const std::string& dtype) { return zeros(Shape(shape), dtype_named(dtype)); },
        nb::arg("shape"), nb::arg("dtype") = "float32");
  m.def("ones", [](std::vector<int64_t> shape, const std::string& dtype) { return ones(Shape(shape), dtype_named(dtype)); },
        nb::arg("shape"), nb::arg("dtype") = "float32");
  // Random factories draw from `generator` when given one, in turn, as the
  // C++ does (Generator g(7); normal(..., g); normal(..., g)); else from a
  // fresh stream of `seed`.
  nb::class_<Generator>(m, "Generator", "A counter-based random stream (Philox-4x32-10) at (seed, offset): the "
                        "random factories given one draw from it in turn, each advancing its offset")
      .def(nb::init<uint64_t>(), nb::arg("seed") = 0)
      .def_prop_ro("seed", &Generator::seed)
      .def_prop_rw("offset", &Generator::offset, &Generator::set_offset, "the next counter it hands out")
      .def("manual_seed", &Generator::manual_seed, nb::arg("seed"), "restarts it at (seed, 0)")
      .def("__repr__", [](const Generator& g) {
        return "remat.Generator(seed=" + std::to_string(g.seed()) + ", offset=" + std::to_string(g.offset()) + ")";
      });
  m.def("normal", [](std::vector<int64_t> shape, double mean, double std, const std::string& dtype, uint64_t seed,
                     Generator* generator) {
          Generator fresh(seed);
          return normal(Shape(shape), mean, std, dtype_named(dtype), generator ? *generator : fresh);
        }, nb::arg("shape"), nb::arg("mean") = 0.0, nb::arg("std") = 1.0, nb::arg("dtype") = "float32",
        nb::arg("seed") = 0, nb::arg("generator").none() = nb::none(),
        "normal(mean, std) values, from `generator` if given, else from a fresh stream of `seed`");
  m.def("randn", [](std::vector<int64_t> shape, uint64_t seed, const std::string& dtype, Generator* generator) {
          Generator fresh(seed);
          return normal(Shape(shape), 0.0, 1.0, dtype_named(dtype), generator ? *generator : fresh);
        }, nb::arg("shape"), nb::arg("seed") = 0, nb::arg("dtype") = "float32",
        nb::arg("generator").none() = nb::none());
  m.def("randint", [](int64_t high, std::vector<int64_t> shape, uint64_t seed, Generator* generator) {
          Generator fresh(seed);
          return randint(high, Shape(shape), generator ? *generator : fresh);
        }, nb::arg("high"), nb::arg("shape"), nb::arg("seed") = 0, nb::arg("generator").none() = nb::none());
}

void bind_ops(nb::module_& m) {
  // The ops (ops/), each recording its node when grad is on.
  m.def("matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); });
  m.def("linear", &linear, nb::arg("x"), nb::arg("weight"), nb::arg("bias") = Tensor());
  // The unary ops, each by its name in ops/unary.cpp's table; python/remat exports those _unary_ops lists.
  for (const UnaryOp& op : unary_ops()) m.def(op.name, op.fn, nb::arg("x"));
  m.def("_unary_ops", [] {
    nb::list ops;
    for (const UnaryOp& op : unary_ops()) {
      ops.append(nb::make_tuple(op.name, op.domain.low, op.domain.high, op.domain.kink_at_zero));
    }
    return ops;
  }, "the unary ops as (name, low, high, kink_at_zero): inputs in [low, high] where each is defined and smooth, "
     "without (-0.1, 0.1) where it has a kink at 0");
  m.def("softmax", &softmax, nb::arg("x"), nb::arg("axis") = -1);
  m.def("log_softmax", &log_softmax, nb::arg("x"), nb::arg("axis") = -1);
  m.def("causal_softmax", &causal_softmax, nb::arg("x"),
        "softmax over the last axis of (..., T, T), row i over columns 0..i (attention's causal mask, fused)");
  m.def("cross_entropy", &cross_entropy, nb::arg("logits"), nb::arg("targets"), nb::arg("ignore_index") = -100);
  m.def("layer_norm", &layer_norm, nb::arg("x"), nb::arg("weight"), nb::arg("bias"), nb::arg("eps") = 1e-5);
  m.def("dropout", [](const Tensor& x, double p, bool training, uint64_t seed) {
          static thread_local Generator g;  // one stream per seed given; replays redraw the same mask
          g.manual_seed(seed);
          return dropout(x, p, training, g);
        }, nb::arg("x"), nb::arg("p"), nb::arg("training") = true, nb::arg("seed") = 0);
}

void bind_no_grad(nb::module_& m) {
  nb::class_<NoGrad>(m, "no_grad", "with remat.no_grad(): ops record no graph inside")
      .def(nb::init<>())
      .def("__enter__", [](NoGrad& g) { g.enter(); })
      .def("__exit__", [](NoGrad& g, nb::handle, nb::handle, nb::handle) { g.exit(); }, nb::arg().none(),
           nb::arg().none(), nb::arg().none());
}

}  // namespace

void bind_tensor(nb::module_& m) {
  bind_tensor_class(m);
  bind_factories(m);
  bind_ops(m);
  bind_no_grad(m);
}

}  // namespace remat::python
