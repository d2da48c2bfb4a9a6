// NCCL on the emulated GPU; see nccl.h. With one rank, every collective's
// result is its input: allreduce (any operation, ncclAvg dividing by 1),
// broadcast from root 0 and allgather each copy `send` to `receive` when they
// differ. What is checked is what a world of one can show: the buffers lie
// in device memory, and a collective does not start while work queued
// earlier on another stream of the device is unordered before it (on a
// GPU it would read the buffer before that work wrote it; see
// unordered_earlier_work in device.cpp).
#include <nccl.h>

#include <cstring>
#include <string>

#include "kernels/cuda/emulation/emulator.h"

struct ncclComm {
  bool aborted = false;
};

namespace remat_emulation {
namespace {

thread_local std::string t_nccl_error;

size_t type_bytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
  }
  return 0;
}

ncclResult_t invalid(const std::string& message) {
  t_nccl_error = message;
  return ncclInvalidArgument;
}

ncclResult_t copy_collective(const char* name, const void* send, void* receive, size_t count, ncclDataType_t type,
                             ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr || comm->aborted) return invalid(std::string(name) + ": no communicator (or an aborted one)");
  const size_t element = type_bytes(type);
  if (element == 0) return invalid(std::string(name) + ": unknown data type " + std::to_string(type));
  const size_t bytes = count * element;
  if (bytes == 0) return ncclSuccess;
  std::string e = check_device_range(send, bytes, "the send buffer");
  if (e.empty()) e = check_device_range(receive, bytes, "the receive buffer");
  if (!e.empty()) return invalid(std::string(name) + ": " + e);
  Task task;
  task.what = std::string(name) + " of " + std::to_string(bytes) + " bytes";
  task.run = [send, receive, bytes, stream]() -> std::string {
    std::string race = unordered_earlier_work(stream);
    if (!race.empty()) return race;
    if (send != receive) std::memmove(receive, send, bytes);
    return std::string();
  };
  return enqueue(stream, std::move(task)) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

}  // namespace
}  // namespace remat_emulation

using namespace remat_emulation;

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, "remat-emulated-nccl", 19);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  (void)id;
  if (nranks != 1 || rank != 0) {
    return invalid("ncclCommInitRank: " + std::to_string(nranks) + " ranks: the emulated GPU runs NCCL with one rank "
                   "only (one device); more ranks need GPUs");
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return ncclUnhandledCudaError;
  *comm = new ncclComm;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (comm == nullptr) return ncclInvalidArgument;
  *async_error = ncclSuccess;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
  }
  return "unknown result";
}

const char* ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return t_nccl_error.c_str();
}

ncclResult_t ncclGroupStart() { return ncclSuccess; }
ncclResult_t ncclGroupEnd() { return ncclSuccess; }

ncclResult_t ncclAllReduce(const void* send, void* receive, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  if (op < ncclSum || op > ncclAvg) return invalid("ncclAllReduce: unknown operation " + std::to_string(op));
  return copy_collective("ncclAllReduce", send, receive, count, type, comm, stream);
}

ncclResult_t ncclBroadcast(const void* send, void* receive, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  if (root != 0) return invalid("ncclBroadcast: root " + std::to_string(root) + " in a world of 1 rank");
  return copy_collective("ncclBroadcast", send, receive, count, type, comm, stream);
}

ncclResult_t ncclAllGather(const void* send, void* receive, size_t count, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  return copy_collective("ncclAllGather", send, receive, count, type, comm, stream);
}
