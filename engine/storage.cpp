// Storage; see storage.h.
#include "engine/storage.h"

#include "engine/sequence.h"

namespace remat {

Storage::Storage(size_t nbytes, Device device, MemoryCategory category)
    : nbytes_(nbytes), device_(placement(device)), category_(category), made_before_(next_sequence_nr()) {
  data_ = allocator_for(device_).allocate(nbytes, category);
}

Storage::~Storage() { allocator_for(device_).deallocate(data_, nbytes_, category_); }

void Storage::set_category(MemoryCategory category) {
  allocator_for(device_).recategorize(nbytes_, category_, category);
  category_ = category;
}

}  // namespace remat
