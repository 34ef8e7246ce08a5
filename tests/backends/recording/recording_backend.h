// A backend that lives in the tests only, to show that a new backend is one folder plus one registration
// line: it registers itself with the registry (recording_backend.cpp) as "recording" (MNN type 99) with an
// option of its own (--recording-label), and runs every op on the registry's host backend while it records
// what it was asked: the ops in order, the forward passes (Backend::begin_forward / end_forward) and the
// label its options carried.
#pragma once

#include <string>
#include <vector>

#include "backends/backend.h"

namespace tilellm::test {

struct Recording {
  std::vector<std::string> ops;    // every call since clear(), by name (begin_forward, end_forward too)
  std::vector<ForwardStep> steps;  // begin_forward's steps; pos copied into positions
  std::vector<std::vector<int32_t>> positions;
  int ended = 0;           // end_forward calls
  std::string label;       // --recording-label of the last backend made
  int weights_loaded = 0;  // matrices in the last load_weights
  void clear() { *this = Recording(); }
};

// What the recording backends made so far have recorded (tests run one at a time).
Recording& recording();

}  // namespace tilellm::test
