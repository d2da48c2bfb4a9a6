// MetaScope; see meta.h.
#include "engine/meta.h"

namespace remat {
namespace {
thread_local bool t_meta = false;
}  // namespace

MetaScope::MetaScope() : previous_(t_meta) { t_meta = true; }
MetaScope::~MetaScope() { t_meta = previous_; }
bool MetaScope::active() { return t_meta; }
Device placement(Device device) { return t_meta ? Device::meta() : device; }

}  // namespace remat
