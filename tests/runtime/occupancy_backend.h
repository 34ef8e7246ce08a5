// A test-only backend, "occupancy-test" (MNN type 98), registered like any other (one line): it runs every
// op on the registry's host backend and offers the pacing measures no built-in backend offers yet, two
// lower occupancy steps and a tile mask (when asked for at load), recording what it was told, so that the
// pacing controller's whole ladder runs on a real session.
#pragma once

namespace tilellm::test {

struct OccupancyLog {
  int occupancy = 0;         // the last step set
  int max_occupancy = 0;     // the highest step set
  bool mask = false;         // the last tile mask state
  bool mask_ever = false;    // the mask was ever switched on
  double mask_fraction = 0;  // BackendParams::tile_mask of the last backend made
};
OccupancyLog& occupancy_log();

}  // namespace tilellm::test
