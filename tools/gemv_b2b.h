// gemv-bw's back-to-back figures for device backends: a format's decode product run over several copies of
// the matrix one after the other inside one forward step, as a decode step runs its products — the step a
// backend that records decode steps captures once and replays (CUDA graphs, Vulkan command buffers) — the
// copies together at least 4x the device's cache, so that every product reads from memory. Where the
// isolated figures of a cold single launch show a launch's ramp and drain, these show what decode gets.
#pragma once

#include <cstddef>

#include "backends/registry.h"

namespace tilellm::cli {

struct BackToBack {
  int copies = 0;
  double us = 0;   // per product: the median step's wall time (launch and synchronisation included) / copies
  double gbs = 0;  // counted weight bytes of a product / us
};

// K inputs, N outputs, held in `mode` from weights stored as `source` (F32 or Q8_0), the activations in
// `act` (gemv-bw's --activations); `bytes` the format's counted bytes of one product (gemv-bw's); `cache`
// the device's cache size. `base` as gemv-bw's rows.
BackToBack gemv_back_to_back(const BackendEntry& entry, const BackendParams& base, int K, int N,
                             WeightsMode mode, ActivationMode act, GgmlType source, double bytes,
                             size_t cache);

}  // namespace tilellm::cli
