#include "base/cpu_isa.h"

#include <atomic>

#include "base/cpu_features.h"

namespace tilellm {
namespace {

// -1: not chosen yet (the best, on first use); else a CpuIsa.
std::atomic<int> g_active{-1};

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar:
      return "scalar";
    case CpuIsa::Avx2:
      return "avx2";
    case CpuIsa::AvxVnni:
      return "avxvnni";
    case CpuIsa::Avx512Vnni:
      return "avx512vnni";
    case CpuIsa::Neon:
      return "neon";
    case CpuIsa::NeonDot:
      return "neondot";
  }
  return "?";
}

bool cpu_isa_supported(CpuIsa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case CpuIsa::Scalar:
      return true;
    case CpuIsa::Avx2:
      return f.avx2_fma_f16c;
    case CpuIsa::AvxVnni:
      return f.avx_vnni;
    case CpuIsa::Avx512Vnni:
      return f.avx512_vnni;
    case CpuIsa::Neon:
      return f.neon;
    case CpuIsa::NeonDot:
      return f.neon_dotprod;
  }
  return false;
}

bool cpu_isa_supported_by_name(std::string_view name) {
  for (int i = 0; i < kCpuIsas; ++i) {
    if (name == cpu_isa_name(CpuIsa(i))) return cpu_isa_supported(CpuIsa(i));
  }
  return false;
}

CpuIsa best_cpu_isa() {
  for (CpuIsa isa : {CpuIsa::Avx512Vnni, CpuIsa::AvxVnni, CpuIsa::Avx2, CpuIsa::NeonDot, CpuIsa::Neon}) {
    if (cpu_isa_supported(isa)) return isa;
  }
  return CpuIsa::Scalar;
}

CpuIsa cpu_isa_fallback(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512Vnni:
      return CpuIsa::AvxVnni;
    case CpuIsa::AvxVnni:
      return CpuIsa::Avx2;
    case CpuIsa::NeonDot:
      return CpuIsa::Neon;
    default:
      return CpuIsa::Scalar;
  }
}

CpuIsa active_cpu_isa() {
  const int a = g_active.load(std::memory_order_relaxed);
  if (a >= 0) [[likely]]
    return CpuIsa(a);
  const CpuIsa best = best_cpu_isa();
  int expected = -1;
  g_active.compare_exchange_strong(expected, int(best), std::memory_order_relaxed);
  return CpuIsa(g_active.load(std::memory_order_relaxed));
}

bool select_cpu_isa(std::string_view name) {
  if (name == "best") {
    g_active.store(int(best_cpu_isa()), std::memory_order_relaxed);
    return true;
  }
  for (int i = 0; i < kCpuIsas; ++i) {
    if (name == cpu_isa_name(CpuIsa(i)) && cpu_isa_supported(CpuIsa(i))) {
      g_active.store(i, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

std::string supported_cpu_isa_names() {
  std::string s;
  for (int i = 0; i < kCpuIsas; ++i) {
    if (cpu_isa_supported(CpuIsa(i))) s += std::string(s.empty() ? "" : ", ") + cpu_isa_name(CpuIsa(i));
  }
  return s;
}

}  // namespace tilellm
