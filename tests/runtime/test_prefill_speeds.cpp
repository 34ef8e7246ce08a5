// --prefill auto's kept speeds (runtime/prefill_speeds.cpp): a file written for one key is read back for that
// key only (its name is the key's hash and the key inside is compared whole); a damaged or foreign file is
// not used; what was kept in the process is found without a file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/prefill_speeds.h"

namespace tilellm {
namespace {

std::string fresh_dir(const char* name) {
  const std::filesystem::path d = std::filesystem::temp_directory_path() /
                                  (std::string("tilellm-") + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

TEST(PrefillSpeeds, a_file_is_read_for_its_own_key_only) {
  const std::string dir = fresh_dir("prefill-file");
  const std::string key = "model 0123 (a test key)\nbackend opencl device 0";
  write(prefill_speeds_path(key, dir), "TLPREFILL 2\n" + key + "\nspeeds 64 512 541.500 119.250\n");
  const auto s = find_prefill_speeds(key, dir);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->tokens, 64);
  EXPECT_EQ(s->device_tokens, 512);
  EXPECT_DOUBLE_EQ(s->device_tps, 541.5);
  EXPECT_DOUBLE_EQ(s->host_tps, 119.25);
  EXPECT_FALSE(s->host_faster());
  EXPECT_EQ(s->source, prefill_speeds_path(key, dir));
  // Found once, kept in the process: found again with the file gone.
  std::filesystem::remove(prefill_speeds_path(key, dir));
  const auto again = find_prefill_speeds(key, dir);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->source, "kept in this process");
  // Another key's file name holding this key's text (as a hash collision would): not used.
  const std::string other = key + " but another device";
  write(prefill_speeds_path(other, dir), "TLPREFILL 2\n" + key + "\nspeeds 64 64 1 2\n");
  EXPECT_FALSE(find_prefill_speeds(other, dir).has_value());
  std::filesystem::remove_all(dir);
}

TEST(PrefillSpeeds, damaged_files_are_not_used) {
  const std::string dir = fresh_dir("prefill-damaged");
  int i = 0;
  for (const char* body : {"speeds 64 64 541.5\n", "speeds 64 64 541.5 nan\n", "speeds 0 64 1 2\n",
                           "speeds 64 0 1 2\n", "speeds 64 64 -1 2\n", "speeds 64 64 1 2",
                           "speeds 64 64 1 2\nmore\n", "speeds 64 1 2\n", "bytes\n"}) {
    const std::string key = "damaged case " + std::to_string(i++);
    write(prefill_speeds_path(key, dir), "TLPREFILL 2\n" + key + "\n" + body);
    EXPECT_FALSE(find_prefill_speeds(key, dir).has_value()) << body;
  }
  const std::string key = "wrong head";  // the first version's file, without the device's batch
  write(prefill_speeds_path(key, dir), "TLPREFILL 1\n" + key + "\nspeeds 64 1 2\n");
  EXPECT_FALSE(find_prefill_speeds(key, dir).has_value());
  std::filesystem::remove_all(dir);
}

TEST(PrefillSpeeds, kept_speeds_are_written_and_read_back) {
  const std::string dir = fresh_dir("prefill-keep") + "/made/by/keep";  // created when missing
  const std::string key = "kept key";
  PrefillSpeeds s;
  s.tokens = 8;
  s.device_tokens = 16;
  s.device_tps = 12.5;
  s.host_tps = 40.25;
  s.source = "measured";
  keep_prefill_speeds(key, dir, s);
  std::ifstream in(prefill_speeds_path(key, dir));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "TLPREFILL 2\nkept key\nspeeds 8 16 12.500 40.250\n");
  const auto back = find_prefill_speeds(key, dir);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->host_faster());
  EXPECT_EQ(back->source, "kept in this process");
  // No directory: kept in the process only.
  keep_prefill_speeds("no dir key", "", s);
  EXPECT_TRUE(find_prefill_speeds("no dir key", "").has_value());
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path().parent_path().parent_path());
}

// The key's engine line names a file that exists and has the size it states (the test binary itself).
TEST(PrefillSpeeds, the_engine_build_is_named_by_its_file) {
  const std::string id = engine_build_identity();
  ASSERT_EQ(id.rfind("engine ", 0), 0u) << id;
  ASSERT_NE(id, "engine unknown");
  const size_t bytes = id.rfind(" bytes, modified ");
  ASSERT_NE(bytes, std::string::npos) << id;
  const size_t sp = id.rfind(' ', bytes - 1);
  const std::string path = id.substr(7, sp - 7);
  const long long size = std::stoll(id.substr(sp + 1, bytes - sp - 1));
  EXPECT_EQ(static_cast<long long>(std::filesystem::file_size(path)), size) << id;
  EXPECT_EQ(engine_build_identity(), id);
}

}  // namespace
}  // namespace tilellm
