// `tilellm gemv-bw` on backend 3 (OpenCL): the decode GEMV on the OpenCL backend's matvec kernels against
// the device's copy and read peaks (gemv_bw_opencl.cpp says what is measured and how).
#pragma once

#include <string>
#include <vector>

#include "bench/gemm_speed.h"

namespace tilellm::cli {

// Prints the gemv-bw table (the CPU version's columns) for each shape; throws when the device does not
// exist, a kernel fails its check, or this build has no OpenCL. peak_mib: the peak buffers' size (0: max(4x
// the device's cache, 256 MiB)).
void gemv_bw_opencl(int device, const std::string& profile, const std::vector<gemm::ShapeConfig>& shapes,
                    const std::string& format, int peak_mib = 0);

}  // namespace tilellm::cli
