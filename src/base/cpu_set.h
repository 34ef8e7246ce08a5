// CPU sets: parsing a user's --cpu-mask, pinning threads, and reporting the effective set a process runs on
// (what benchmarks record beside every row).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tilellm {

// A hexadecimal CPU mask as llama.cpp takes it ("0x3", "3", "ff00"): bit i selects CPU i. Returns the CPUs in
// increasing order; throws tilellm::Error for anything else or an empty mask.
std::vector<int> parse_cpu_mask(std::string_view hex);

// The CPUs the calling thread may run on, as a list of ranges ("0-3,8"); "unknown" if it cannot be read.
std::string affinity_list();

// Restricts the calling thread to one CPU; throws tilellm::Error naming the CPU when the OS refuses.
void pin_current_thread(int cpu);

}  // namespace tilellm
