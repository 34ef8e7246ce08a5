// CPU sets: parsing a user's --cpu-mask, pinning threads, reporting the effective set a process runs on
// (what benchmarks record beside every row), and how many CPUs it may use (the default thread count).
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

// The CPUs the calling thread can keep busy: those of its affinity mask (taskset, a container's cpuset),
// fewer where the cgroup's CPU bandwidth limit allows fewer (cgroup v2 cpu.max, v1 cpu.cfs_quota_us over
// cpu.cfs_period_us, in the process's cgroup and those above it), at least 1. The thread pool spins
// between ops, so a thread more than the CPUs waits a scheduler time slice at every op it is late for.
int usable_cpus();

// Whole CPUs a bandwidth limit of `quota` microseconds every `period` allows (rounded down, at least 1);
// 0 when there is no limit (quota negative, as v1's -1 and v2's "max" are read, or period not positive).
int cpus_of_quota(long long quota, long long period);

}  // namespace tilellm
