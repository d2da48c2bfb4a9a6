// The order autograd nodes are recorded in. Each recorded node takes the
// next sequence number (NodeRecord::sequence_nr); storages and handles note
// the number current when they were made or let go, which is how the
// scheduler places an input from outside the graph between two nodes
// (engine/record.h, Note [Inputs from outside the graph]). Kept apart from
// autograd.h so that storage.cpp, below it, can read the clock.
#pragma once

#include <cstdint>

namespace remat {

// The sequence_nr the next recorded node will get.
uint64_t next_sequence_nr();
// Skips a sequence_nr, which no node gets, and returns the one after it: a
// mark between what was allocated before the call (Storage::made_before()
// below it) and after (at or above it). A Checkpointer marks each step's
// start so.
uint64_t mark_sequence();
// The sequence_nr of a node being recorded: next_sequence_nr(), advanced.
uint64_t take_sequence_nr();

}  // namespace remat
