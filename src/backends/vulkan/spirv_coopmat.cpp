// The rewrite of glslang 11's cooperative-matrix types into ids (spirv_coopmat.h).
#include "backends/vulkan/spirv_coopmat.h"

#include <algorithm>
#include <map>
#include <set>

#include "base/error.h"

namespace tilellm::vulkan {
namespace {

constexpr uint32_t kMagic = 0x07230203;
constexpr uint16_t kOpTypeInt = 21, kOpTypeFloat = 22, kOpConstant = 43, kOpTypeCoopMat = 4456;

// Instructions of the module's preamble (capabilities ... annotations, and debug lines): the types and
// constants section starts at the first instruction that is none of these.
bool preamble(uint16_t op) {
  switch (op) {
    case 0:     // OpNop
    case 2:     // OpSourceContinued
    case 3:     // OpSource
    case 4:     // OpSourceExtension
    case 5:     // OpName
    case 6:     // OpMemberName
    case 7:     // OpString
    case 8:     // OpLine
    case 10:    // OpExtension
    case 11:    // OpExtInstImport
    case 14:    // OpMemoryModel
    case 15:    // OpEntryPoint
    case 16:    // OpExecutionMode
    case 17:    // OpCapability
    case 71:    // OpDecorate
    case 72:    // OpMemberDecorate
    case 73:    // OpDecorationGroup
    case 74:    // OpGroupDecorate
    case 75:    // OpGroupMemberDecorate
    case 317:   // OpNoLine
    case 330:   // OpModuleProcessed
    case 331:   // OpExecutionModeId
    case 332:   // OpDecorateId
    case 5632:  // OpDecorateString
    case 5633:  // OpMemberDecorateString
      return true;
    default:
      return false;
  }
}

}  // namespace

std::vector<uint32_t> resolve_cooperative_matrix_types(const std::vector<uint32_t>& in) {
  if (in.size() < 5 || in[0] != kMagic) fail("internal: not a SPIR-V module ({} words)", in.size());
  // The instructions as [begin, end) word ranges.
  std::vector<std::pair<size_t, size_t>> insts;
  bool any = false;
  for (size_t i = 5; i < in.size();) {
    const uint32_t count = in[i] >> 16;
    if (count == 0 || i + count > in.size())
      fail("internal: SPIR-V instruction at word {} runs past the module", i);
    insts.push_back({i, i + count});
    any = any || (in[i] & 0xffff) == kOpTypeCoopMat;
    i += count;
  }
  if (!any) return in;

  uint32_t bound = in[3];
  size_t first_type = insts.size();  // index of the section's first instruction
  for (size_t k = 0; k < insts.size(); ++k) {
    if (!preamble(uint16_t(in[insts[k].first] & 0xffff))) {
      first_type = k;
      break;
    }
  }
  // The scalar types (no operands that are ids): moved to the section's start.
  std::vector<size_t> scalars;
  uint32_t uint_id = 0;
  std::map<uint32_t, uint32_t> float_ids;  // width -> id
  std::set<uint32_t> type_ids, constant_ids;
  for (size_t k = first_type; k < insts.size(); ++k) {
    const uint32_t* w = &in[insts[k].first];
    const uint16_t op = uint16_t(w[0] & 0xffff);
    if (op == kOpTypeInt || op == kOpTypeFloat) scalars.push_back(k);
    if (op == kOpTypeInt && w[2] == 32 && w[3] == 0) uint_id = w[1];
    if (op == kOpTypeFloat) float_ids[w[2]] = w[1];
    if (op == kOpTypeInt || op == kOpTypeFloat) type_ids.insert(w[1]);
    if (op == kOpConstant) constant_ids.insert(w[2]);
  }
  // A module already in the id form (a compiler that knows the extension, or this rewrite's output) stays.
  bool id_form = true;
  for (const auto& [b, e] : insts) {
    const uint32_t* w = &in[b];
    if ((w[0] & 0xffff) != kOpTypeCoopMat) continue;
    id_form = id_form && e - b == 7 && type_ids.count(w[2]) && constant_ids.count(w[3]) &&
              constant_ids.count(w[4]) && constant_ids.count(w[5]) && constant_ids.count(w[6]);
  }
  if (id_form) return in;
  std::vector<uint32_t> head;  // what goes first in the section: the scalar types, then the new constants
  for (size_t k : scalars)
    head.insert(head.end(), in.begin() + long(insts[k].first), in.begin() + long(insts[k].second));
  if (!uint_id) {
    uint_id = bound++;
    head.insert(head.end(), {(4u << 16) | kOpTypeInt, uint_id, 32, 0});
  }
  std::map<uint32_t, uint32_t> constants;  // value -> id
  auto constant = [&](uint32_t value) {
    auto it = constants.find(value);
    if (it != constants.end()) return it->second;
    const uint32_t id = bound++;
    head.insert(head.end(), {(4u << 16) | kOpConstant, uint_id, id, value});
    constants[value] = id;
    return id;
  };

  std::vector<uint32_t> out(in.begin(), in.begin() + 5);
  for (size_t k = 0; k < first_type; ++k)
    out.insert(out.end(), in.begin() + long(insts[k].first), in.begin() + long(insts[k].second));
  // The section without its scalar types; the matrix types rewritten (making the constants `head` ends with).
  std::vector<uint32_t> rest;
  for (size_t k = first_type; k < insts.size(); ++k) {
    if (std::find(scalars.begin(), scalars.end(), k) != scalars.end()) continue;
    const uint32_t* w = &in[insts[k].first];
    const size_t count = insts[k].second - insts[k].first;
    if ((w[0] & 0xffff) != kOpTypeCoopMat) {
      rest.insert(rest.end(), w, w + count);
      continue;
    }
    if (count != 7)
      fail("internal: OpTypeCooperativeMatrixKHR of {} words (glslang's literal form has 7)", count);
    const auto f = float_ids.find(w[2]);
    if (w[2] != 16 && w[2] != 32) fail("internal: cooperative matrix of component width {} (16 or 32)", w[2]);
    if (f == float_ids.end())
      fail("internal: cooperative matrix of fp{} in a module without that float type", w[2]);
    rest.insert(rest.end(),
                {w[0], w[1], f->second, constant(w[3]), constant(w[4]), constant(w[5]), constant(w[6])});
  }
  out.insert(out.end(), head.begin(), head.end());
  out.insert(out.end(), rest.begin(), rest.end());
  out[3] = bound;
  return out;
}

}  // namespace tilellm::vulkan
