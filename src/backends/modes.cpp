#include "backends/modes.h"

#include "base/error.h"

namespace tilellm {

WeightsMode parse_weights_mode(std::string_view s) {
  if (s == "native") return WeightsMode::Native;
  if (s == "int4b64") return WeightsMode::Int4B64;
  if (s == "int8b0") return WeightsMode::Int8B0;
  if (s == "int4b0") return WeightsMode::Int4B0;
  if (s == "f16") return WeightsMode::F16;
  if (s == "f32") return WeightsMode::F32;
  fail("unknown weights mode '{}' (expected native, int4b64, int8b0, int4b0, f16 or f32)", s);
}

const char* weights_mode_name(WeightsMode m) {
  switch (m) {
    case WeightsMode::Native:
      return "native";
    case WeightsMode::Int4B64:
      return "int4b64";
    case WeightsMode::Int8B0:
      return "int8b0";
    case WeightsMode::Int4B0:
      return "int4b0";
    case WeightsMode::F16:
      return "f16";
    case WeightsMode::F32:
      return "f32";
  }
  return "?";
}

}  // namespace tilellm
