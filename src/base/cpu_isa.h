// One dispatch for every CPU kernel family: the instruction sets kernels are compiled for, the one the
// process runs (the best this CPU has, chosen once at start-up from its features, or the one selected by
// name: the CPU backend's --isa and the tests' single hook), and the table each family resolves once from
// its per-ISA entries. A family without an entry at the running ISA takes the nearest one below it:
//   avx512vnni -> avxvnni -> avx2 -> scalar        neondot -> neon -> scalar
// (a family's entry for an ISA is null where the build or the CPU cannot run it). base/isa_target.h writes
// the per-ISA file scaffolding once.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace tilellm {

enum class CpuIsa : int { Scalar = 0, Avx2, AvxVnni, Avx512Vnni, Neon, NeonDot };
inline constexpr int kCpuIsas = 6;

// "scalar", "avx2", "avxvnni" (AVX2 + AVX-VNNI), "avx512vnni" (AVX-512 F/BW/VL/VNNI), "neon" (ARMv8-A
// Advanced SIMD), "neondot" (with the ARMv8.2 dot product).
const char* cpu_isa_name(CpuIsa isa);
// Whether this CPU (with this build) runs code compiled for isa; scalar always.
bool cpu_isa_supported(CpuIsa isa);
// The same by name: false for a name that is not an ISA.
bool cpu_isa_supported_by_name(std::string_view name);
CpuIsa best_cpu_isa();
// The next ISA down the chain above (scalar for scalar).
CpuIsa cpu_isa_fallback(CpuIsa isa);

// The ISA every family dispatches on now.
CpuIsa active_cpu_isa();
// Every family at once: "best", or one of the names above. False, changing nothing, when the name is not an
// ISA or this CPU cannot run it. Not meant to be called while other threads run kernels.
bool select_cpu_isa(std::string_view name);
// "scalar, avx2, avxvnni, avx512vnni" on x86, the names this CPU runs, for messages.
std::string supported_cpu_isa_names();

// A kernel family's entries (pointers: a table, or a function), resolved once per ISA to the nearest
// non-null entry at or below it. The scalar entry must be given and not null.
template <class T>
class IsaTable {
 public:
  IsaTable(std::initializer_list<std::pair<CpuIsa, T>> entries) {
    T given[kCpuIsas] = {};
    for (const auto& [isa, v] : entries) given[int(isa)] = v;
    for (int i = 0; i < kCpuIsas; ++i) {
      CpuIsa at = CpuIsa(i);
      while (!given[int(at)] && at != CpuIsa::Scalar) at = cpu_isa_fallback(at);
      resolved_[i] = given[int(at)];
      from_[i] = at;
    }
  }
  // The entry the running ISA uses, and the ISA it was compiled for.
  T get() const { return resolved_[int(active_cpu_isa())]; }
  CpuIsa isa() const { return from_[int(active_cpu_isa())]; }
  const char* name() const { return cpu_isa_name(isa()); }

 private:
  T resolved_[kCpuIsas];
  CpuIsa from_[kCpuIsas];
};

}  // namespace tilellm
