// Accelerator; see accelerator.h.
#include "train/accelerator.h"

#include "engine/factory.h"
#include "ops/ops.h"

#if REMAT_HAVE_NCCL
#include "comm/nccl.h"
#endif

namespace remat::train {

void PreparedOptimizer::step() {
  if (accelerator_.sync_gradients()) optimizer_.step();
}

void PreparedOptimizer::zero_grad() {
  if (accelerator_.sync_gradients()) optimizer_.zero_grad();
}

void PreparedScheduler::step() {
  if (accelerator_.sync_gradients()) scheduler_.step();
}

Accelerator::Accelerator(AcceleratorOptions options)
    : options_(std::move(options)), device_(options_.device), comm_(options_.communicator) {
  REMAT_CHECK(options_.gradient_accumulation_steps >= 1,
              "Accelerator: gradient_accumulation_steps must be >= 1, got {}", options_.gradient_accumulation_steps);
  REMAT_CHECK(options_.bucket_bytes > 0, "Accelerator: bucket_bytes must be > 0, got {}", options_.bucket_bytes);
  REMAT_CHECK(!device_.is_meta(), "Accelerator: device meta holds no values to train");
  if (comm_) return;
  if (!device_.is_cuda() || !comm::Mpi::launched_by_mpi()) {
    comm_ = comm::world();
    return;
  }
#if REMAT_HAVE_NCCL
  bootstrap_ = std::make_unique<comm::Mpi>();
  auto nccl = std::make_shared<comm::Nccl>(*bootstrap_);
  device_ = Device::cuda(nccl->device());
  comm_ = std::move(nccl);
#else
  REMAT_FAIL("Accelerator: device {} under mpirun needs NCCL, which this build has not (CMake found no NCCL)",
             device_.str());
#endif
}

void Accelerator::prepare(nn::Module& model) {
  model_ = &model;
  model.to(device_);
  if (num_processes() > 1) comm::broadcast_buckets(*comm_, model.parameters(), 0, options_.bucket_bytes);
}

data::DataLoader Accelerator::prepare(const data::DataLoader& loader) {
  data::LoaderOptions options = loader.options();
  REMAT_CHECK(options.num_shards == 1, "Accelerator: the loader is already split into {} shards", options.num_shards);
  options.num_shards = num_processes();
  options.shard = rank();
  options.device = device_;
  data::DataLoader sharded(loader.dataset(), options);
  if (batch_rows_.empty()) {  // the first loader prepared is the training loader
    for (int64_t i = 0; i < sharded.size(); ++i) batch_rows_.push_back(sharded.batch_rows(i));
    epoch_length_ = sharded.size();
    position_ = 0;
  }
  return sharded;
}

void Accelerator::set_epoch_length(int64_t batches) {
  REMAT_CHECK(batches >= 0, "Accelerator: epoch length must be >= 0 batches, got {}", batches);
  REMAT_CHECK(batch_rows_.empty() || batches <= static_cast<int64_t>(batch_rows_.size()),
              "Accelerator: epoch length {} is longer than the prepared loader's {} batches", batches,
              batch_rows_.size());
  epoch_length_ = batches;
  position_ = 0;
}

void Accelerator::resume_at(int64_t optimizer_steps, int64_t batch) {
  REMAT_CHECK(!window_open_, "Accelerator::resume_at: a micro-batch is open");
  REMAT_CHECK(optimizer_steps >= 0 && batch >= 0 && batch % options_.gradient_accumulation_steps == 0 &&
                  (epoch_length_ == 0 || batch < epoch_length_),
              "Accelerator::resume_at: step {} at batch {} is not the start of a window (accumulation {}, epoch of "
              "{} batches)", optimizer_steps, batch, options_.gradient_accumulation_steps, epoch_length_);
  optimizer_steps_ = optimizer_steps;
  position_ = batch;
  sync_gradients_ = true;
}

Accelerator::Window Accelerator::accumulate(nn::Module& model) {
  begin_micro_batch(model);
  return Window(*this);
}

void Accelerator::begin_micro_batch(nn::Module& model) {
  REMAT_CHECK(!window_open_, "Accelerator::accumulate: the previous micro-batch's guard is still open");
  REMAT_CHECK(model_ == nullptr || model_ == &model,
              "Accelerator::accumulate: called with another model than the prepared one");
  model_ = &model;
  const int64_t k = options_.gradient_accumulation_steps;
  const int64_t start = position_ - position_ % k;
  const int64_t end = epoch_length_ > 0 ? std::min(start + k, epoch_length_) : start + k;
  // Rows per micro-batch: the prepared loader's batch sizes within its
  // epochs, else all equal.
  auto rows = [&](int64_t i) -> double {
    const bool known = epoch_length_ > 0 && i < static_cast<int64_t>(batch_rows_.size());
    return known ? static_cast<double>(batch_rows_[static_cast<size_t>(i)]) : 1.0;
  };
  double window_rows = 0;
  for (int64_t i = start; i < end; ++i) window_rows += rows(i);
  loss_scale_ = rows(position_) / window_rows;
  sync_gradients_ = position_ == end - 1;
  window_open_ = true;
}

// sync_gradients() keeps the closed micro-batch's value until the next
// accumulate(), as in Accelerate: a step called after the guard's scope
// still sees whether this micro-batch ended a window.
Accelerator::Window::~Window() {
  Accelerator& a = accelerator_;
  a.window_open_ = false;
  if (a.sync_gradients_) ++a.optimizer_steps_;
  ++a.position_;
  if (a.epoch_length_ > 0 && a.position_ == a.epoch_length_) a.position_ = 0;
}

void Accelerator::backward(const Tensor& loss) {
  REMAT_CHECK(window_open_ || options_.gradient_accumulation_steps == 1,
              "Accelerator::backward: with gradient_accumulation_steps = {}, call it inside "
              "accelerator.accumulate(model)",
              options_.gradient_accumulation_steps);
  REMAT_CHECK(loss.defined() && loss.numel() == 1, "Accelerator::backward: the loss must be a scalar, got {}",
              loss.defined() ? loss.str() : "an undefined tensor");
  if (loss_scale_ == 1.0) {
    loss.backward();
  } else {
    mul(loss, loss_scale_).backward();
  }
  if (sync_gradients_ && gradient_allreduce_ && num_processes() > 1) {
    REMAT_CHECK(model_ != nullptr,
                "Accelerator::backward: prepare(model) first, so that its gradients can be synchronised");
    comm::average_gradients(*comm_, model_->parameters(), options_.bucket_bytes);
  }
}

Tensor Accelerator::gather(const Tensor& values) const {
  REMAT_CHECK(values.defined() && values.dim() >= 1, "Accelerator::gather: need a tensor with a leading axis, got {}",
              values.defined() ? values.str() : "an undefined tensor");
  // NCCL gathers GPU buffers only; the result comes back to the CPU.
  const Device where = comm_->backend() == "nccl" ? device_ : Device::cpu();
  const Tensor local = to(dense(values), where);
  Shape shape = local.shape();
  shape[0] *= num_processes();
  Tensor out(shape, local.dtype(), where);
  synchronize(where);
  comm_->allgather(local.raw_data(), out.raw_data(), local.numel(), local.dtype());
  return to(out, Device::cpu());
}

}  // namespace remat::train
