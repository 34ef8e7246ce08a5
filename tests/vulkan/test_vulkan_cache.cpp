// The Vulkan pipeline cache on disk (backends/program_cache.h, --vk-cache): a second start seeds its
// pipelines with the first's pipeline cache data and applies its self-check verdict instead of checking
// again — a failed pipeline (the broken add shader of the test hook) stays failed, with its warning; a
// refresh checks again and rewrites the entry; a damaged entry is reported and rebuilt; the cache off
// writes nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_backend.h"
#include "vulkan_test.h"

namespace tilellm {
namespace {

const uint32_t kBrokenAdd[] = {
#include "broken_add.inc"
};

using Mode = ProgramCacheOptions::Mode;

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name)
      : path(std::filesystem::path(::testing::TempDir()) / ("tilellm_vk_cache_" + name)) {
    std::filesystem::remove_all(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::vector<std::filesystem::path> files() const {
    std::vector<std::filesystem::path> v;
    if (std::filesystem::exists(path)) {
      for (const auto& e : std::filesystem::directory_iterator(path)) v.push_back(e.path());
    }
    return v;
  }
};

VulkanBackendOptions options(Mode mode, const std::string& dir, bool broken_add) {
  VulkanBackendOptions o;
  o.device = test::vulkan_test_device();
  o.max_in_elems = o.max_out_elems = 4096;
  o.max_width = 64;
  o.cache = {mode, dir};
  if (broken_add) {
    o.test_pipeline = "add";
    o.test_spirv.assign(std::begin(kBrokenAdd), std::end(kBrokenAdd));
  }
  return o;
}

TEST(VulkanCache, a_second_start_takes_the_pipelines_and_the_verdict_from_the_cache) {
  if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  TempDir dir("second_start");
  {
    VulkanBackend be(options(Mode::On, dir.path.string(), false));
    EXPECT_FALSE(be.verdict_from_cache());
  }
  const std::vector<std::filesystem::path> files = dir.files();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].filename().string().rfind("vulkan-", 0), 0u) << files[0];
  VulkanBackend be(options(Mode::On, dir.path.string(), false));
  EXPECT_TRUE(be.pipelines_from_cache());
  EXPECT_TRUE(be.verdict_from_cache());
  EXPECT_TRUE(be.cpu_fallbacks().empty());
  std::vector<float> acc = {1.0f, 2.0f, 3.0f};
  const std::vector<float> x = {0.5f, -1.0f, 4.0f};
  be.add(acc.data(), x.data(), 3);
  EXPECT_EQ(acc, (std::vector<float>{1.5f, 1.0f, 7.0f}));
}

TEST(VulkanCache, a_cached_failure_keeps_its_fallback_and_a_refresh_checks_again) {
  if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  TempDir dir("failure");
  testing::internal::CaptureStderr();
  { VulkanBackend be(options(Mode::On, dir.path.string(), true)); }
  testing::internal::GetCapturedStderr();
  testing::internal::CaptureStderr();
  {
    VulkanBackend be(options(Mode::On, dir.path.string(), true));
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_TRUE(be.verdict_from_cache());
    EXPECT_NE(err.find("Vulkan pipeline add failed its self-check (cached verdict)"), std::string::npos)
        << err;
    EXPECT_EQ(be.cpu_fallbacks(), std::vector<std::string>{"add"});
    std::vector<float> acc = {1.0f, 2.0f};
    const std::vector<float> x = {0.25f, -3.0f};
    be.add(acc.data(), x.data(), 2);  // on the CPU: right despite the broken shader
    EXPECT_EQ(acc, (std::vector<float>{1.25f, -1.0f}));
  }
  testing::internal::CaptureStderr();
  VulkanBackend be(options(Mode::Refresh, dir.path.string(), true));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(be.verdict_from_cache());
  EXPECT_NE(err.find("Vulkan pipeline add failed its self-check on"), std::string::npos) << err;
}

TEST(VulkanCache, a_damaged_entry_is_reported_and_rebuilt_and_off_writes_nothing) {
  if (!test::have_vulkan()) GTEST_SKIP() << "no Vulkan device";
  TempDir dir("damaged");
  { VulkanBackend be(options(Mode::On, dir.path.string(), false)); }
  const std::vector<std::filesystem::path> files = dir.files();
  ASSERT_EQ(files.size(), 1u);
  std::vector<char> bytes;
  {
    std::ifstream in(files[0], std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 60u);
  bytes[bytes.size() / 2] ^= 0x5a;
  {
    std::ofstream out(files[0], std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
  }
  testing::internal::CaptureStderr();
  {
    VulkanBackend be(options(Mode::On, dir.path.string(), false));
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("note: Vulkan pipeline cache: "), std::string::npos) << err;
    EXPECT_FALSE(be.verdict_from_cache());
  }
  VulkanBackend again(options(Mode::On, dir.path.string(), false));
  EXPECT_TRUE(again.verdict_from_cache());

  TempDir off("off");
  { VulkanBackend be(options(Mode::Off, off.path.string(), false)); }
  EXPECT_TRUE(off.files().empty());
}

}  // namespace
}  // namespace tilellm
