// The rewrite of glslang 11's cooperative-matrix types (backends/vulkan/spirv_coopmat.h), on the embedded
// prompt GEMM (shaders/matmul_coopmat.comp) as built, on a module without the type and on broken modules.
// Needs no device: it checks words, so it runs where no driver has cooperative matrices (lavapipe).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "backends/vulkan/shaders.h"
#include "backends/vulkan/spirv_coopmat.h"
#include "base/error.h"

namespace tilellm {
namespace {

using vulkan::resolve_cooperative_matrix_types;

std::vector<uint32_t> embedded(const char* name) {
  const vulkan::ShaderCode* c = vulkan::find_shader(name, false);
  EXPECT_NE(c, nullptr) << name;
  return c ? std::vector<uint32_t>(c->words, c->words + c->n_words) : std::vector<uint32_t>{};
}

TEST(SpirvCoopmat, MatrixTypesNameDeclaredIdsOfTheirComponentAndConstants) {
  const std::vector<uint32_t> out = resolve_cooperative_matrix_types(embedded("matmul_coopmat"));
  ASSERT_GT(out.size(), 5u);
  EXPECT_EQ(out[0], 0x07230203u);
  std::map<uint32_t, uint32_t> float_width, constant_value;  // id -> width / value (32-bit unsigned)
  uint32_t uint_id = 0;
  std::set<uint32_t> defined;
  // (component width, scope, rows, columns, use) of every matrix type met
  std::set<std::vector<uint32_t>> matrices;
  for (size_t i = 5; i < out.size();) {
    const uint32_t count = out[i] >> 16, op = out[i] & 0xffff;
    ASSERT_GT(count, 0u);
    ASSERT_LE(i + count, out.size());
    const uint32_t* w = &out[i];
    if (op == 21 && w[2] == 32 && w[3] == 0) uint_id = w[1];
    if (op == 22) float_width[w[1]] = w[2];
    if (op == 43 && w[1] == uint_id) constant_value[w[2]] = w[3];
    if (op == 4456) {
      ASSERT_EQ(count, 7u);
      for (int k = 2; k < 7; ++k)
        EXPECT_TRUE(defined.count(w[k])) << "operand " << k << " used before it is declared";
      ASSERT_TRUE(float_width.count(w[2]));
      for (int k = 3; k < 7; ++k)
        ASSERT_TRUE(constant_value.count(w[k])) << "operand " << k << " is no uint constant";
      matrices.insert({float_width[w[2]], constant_value[w[3]], constant_value[w[4]], constant_value[w[5]],
                       constant_value[w[6]]});
    }
    // Result ids: types have theirs in word 1, constants in word 2.
    if ((op >= 19 && op <= 39) || op == 4456) defined.insert(w[1]);
    if (op == 43) defined.insert(w[2]);
    i += count;
  }
  // A and B fp16 (uses 0, 1) and C fp32 (use 2), 16 x 16 at subgroup scope (3).
  const std::set<std::vector<uint32_t>> want = {{16, 3, 16, 16, 0}, {16, 3, 16, 16, 1}, {32, 3, 16, 16, 2}};
  EXPECT_EQ(matrices, want);
  EXPECT_LT(*defined.rbegin(), out[3]) << "an id past the module's bound";
}

TEST(SpirvCoopmat, ModulesWithoutTheTypeInTheIdFormAndBroken) {
  const std::vector<uint32_t> plain = embedded("add");
  EXPECT_EQ(resolve_cooperative_matrix_types(plain), plain);
  // The id form (this rewrite's output, or a compiler that knows the extension) passes unchanged.
  const std::vector<uint32_t> once = resolve_cooperative_matrix_types(embedded("matmul_coopmat"));
  EXPECT_EQ(resolve_cooperative_matrix_types(once), once);
  EXPECT_THROW(resolve_cooperative_matrix_types({1, 2, 3}), Error);
  std::vector<uint32_t> cut = embedded("matmul_coopmat");
  cut.back() = (5u << 16) | (cut.back() & 0xffff);  // the last instruction (OpFunctionEnd) runs past the end
  EXPECT_THROW(resolve_cooperative_matrix_types(cut), Error);
  // A matrix of a component width the shaders never use (8) is refused by name.
  std::vector<uint32_t> odd = embedded("matmul_coopmat");
  for (size_t i = 5; i < odd.size(); i += odd[i] >> 16) {
    if ((odd[i] & 0xffff) == 4456) {
      odd[i + 2] = 8;
      break;
    }
  }
  EXPECT_THROW(resolve_cooperative_matrix_types(odd), Error);
}

}  // namespace
}  // namespace tilellm
