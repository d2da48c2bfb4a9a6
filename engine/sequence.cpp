// The recording order's counter; see sequence.h.
#include "engine/sequence.h"

#include <atomic>

namespace remat {
namespace {

std::atomic<uint64_t> g_next_sequence_nr{0};

}  // namespace

uint64_t next_sequence_nr() { return g_next_sequence_nr.load(); }
uint64_t mark_sequence() { return ++g_next_sequence_nr; }
uint64_t take_sequence_nr() { return g_next_sequence_nr++; }

}  // namespace remat
