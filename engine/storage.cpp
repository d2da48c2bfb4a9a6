// Storage; see storage.h.
#include "engine/storage.h"

#include "engine/error.h"
#include "engine/sequence.h"

namespace remat {

Storage::Storage(size_t nbytes, Device device, MemoryCategory category)
    : nbytes_(nbytes), device_(placement(device)), category_(category), made_before_(next_sequence_nr()) {
  data_ = allocator_for(device_).allocate(nbytes, category);
}

Storage::Storage(void* data, size_t nbytes, MemoryCategory category, std::shared_ptr<void> owner)
    : data_(data), nbytes_(nbytes), device_(Device::cpu()), category_(category), made_before_(next_sequence_nr()),
      owner_(std::move(owner)) {
  REMAT_CHECK(owner_ != nullptr, "Storage: borrowed bytes need their owner");
  allocator_for(device_).count_borrowed(static_cast<int64_t>(nbytes_), category_);
}

Storage::~Storage() {
  if (owner_) {
    allocator_for(device_).count_borrowed(-static_cast<int64_t>(nbytes_), category_);
    owner_.reset();  // the owner's deleter hands the bytes back
    return;
  }
  allocator_for(device_).deallocate(data_, nbytes_, category_);
}

void Storage::set_category(MemoryCategory category) {
  allocator_for(device_).recategorize(nbytes_, category_, category);
  category_ = category;
}

}  // namespace remat
