// The program binary cache (backends/program_cache.h): a second start loads the programs and the
// self-check's verdict from disk, and the kernels so loaded compute what the source-built ones compute; a
// corrupt, truncated, mismatching or driver-rejected entry is rebuilt and overwritten; an unwritable or
// missing directory never fails a start; a cached verdict of a broken kernel applies its fallback without
// running the self-check, and a change of source, profile or cache type misses the entry.
//
// Every test uses a directory of its own under the system temp directory (made with mkdtemp, removed after),
// never the user's cache, so `ctest -j` runs them side by side without sharing an entry.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/opencl/kernels.h"
#include "backends/opencl/opencl_backend.h"
#include "backends/program_cache.h"
#include "base/error.h"
#include "base/fp16.h"
#include "base/thread_pool.h"
#include "broken_kernels.h"
#include "format/quants.h"
#include "runtime/bench.h"
#include "test_device.h"

namespace tilellm {
namespace {

namespace fs = std::filesystem;
using Mode = ProgramCacheOptions::Mode;

bool have_device() {
  static const bool have = !opencl::list_devices().empty();
  return have;
}

// A fresh directory, removed with everything in it when the test ends.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "tilellm-clcache-test-XXXXXX").string();
    if (!mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed");
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  // The regular files in it (entries, and any temporary file a write left behind).
  std::vector<fs::path> files() const {
    std::vector<fs::path> v;
    for (const auto& e : fs::directory_iterator(path)) v.push_back(e.path());
    return v;
  }
};

std::vector<uint8_t> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}
void write_file(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

OpenclBackendOptions cached(const fs::path& dir, Mode mode = Mode::On) {
  OpenclBackendOptions o;
  o.device = test::opencl_test_device();
  o.max_tokens = 8;
  o.max_in_elems = o.max_out_elems = 1 << 12;
  o.max_width = 256;
  o.cache.mode = mode;
  o.cache.dir = dir.string();
  return o;
}

// A backend made with stderr captured; `err` receives what it printed.
std::unique_ptr<OpenclBackend> start(const OpenclBackendOptions& o, std::string* err = nullptr) {
  ::testing::internal::CaptureStderr();
  std::unique_ptr<OpenclBackend> be;
  try {
    be = std::make_unique<OpenclBackend>(o);
  } catch (...) {
    ::testing::internal::GetCapturedStderr();
    throw;
  }
  const std::string e = ::testing::internal::GetCapturedStderr();
  if (err) *err = e;
  return be;
}

size_t count_lines(const std::string& s, const std::string& prefix) {
  size_t n = 0;
  for (size_t i = 0; (i = s.find(prefix, i)) != std::string::npos; i += prefix.size()) ++n;
  return n;
}

std::vector<float> rand_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) {
    do x = d(rng);
    while (x == 0.0f);
  }
  return v;
}

// Random Q4_0 rows with sane half scales (n_in a multiple of 32).
std::vector<uint8_t> q4_0_rows(int64_t n_in, int64_t n_out, uint32_t seed) {
  std::vector<uint8_t> b(row_size(GgmlType::Q4_0, n_in) * size_t(n_out));
  std::mt19937 rng(seed);
  for (uint8_t& v : b) v = uint8_t(rng());
  for (size_t i = 0; i < b.size(); i += 18) {
    const uint16_t d = fp32_to_fp16(0.01f + 0.001f * float(i % 7));
    std::memcpy(&b[i], &d, 2);
  }
  return b;
}

// Outputs of several ops on fixed random inputs of odd sizes (matmul and matvec, RMSNorm, RoPE, GLU, add,
// embedding), so two backends' kernels can be compared bit for bit.
std::vector<std::vector<float>> op_outputs(OpenclBackend& be) {
  std::vector<std::vector<float>> out;
  const int64_t n_in = 96, n_out = 37;
  static const std::vector<uint8_t> q = q4_0_rows(n_in, n_out, 7);
  Weight w;
  w.name = "q4_0";
  w.type = GgmlType::Q4_0;
  w.data = q.data();
  w.n_in = n_in;
  w.n_out = n_out;
  w.row_bytes = row_size(GgmlType::Q4_0, n_in);
  be.upload_weight(w);
  const std::vector<float> x = rand_floats(size_t(5 * n_in), 11);
  for (int64_t n_tok : {5, 1}) {
    out.emplace_back(size_t(n_tok * n_out));
    be.matmul(w, x.data(), n_tok, out.back().data());
  }
  const int32_t ids[3] = {36, 0, 5};
  out.emplace_back(size_t(3 * n_in));
  be.embed(w, ids, 3, 0.75f, out.back().data());

  const int64_t rows = 3, n = 77;
  const std::vector<float> xr = rand_floats(size_t(rows * n), 12), nw = rand_floats(size_t(n), 13);
  out.emplace_back(xr.size());
  be.rmsnorm(xr.data(), nw.data(), out.back().data(), rows, n, 1e-5f);

  const RopeTable table(16, 24, 10000.0f, 1.0f);
  const int32_t pos[3] = {15, 2, 9};
  out.push_back(rand_floats(size_t(3 * 2 * 24), 14));
  be.rope(out.back().data(), 3, 2, 24, 24, pos, table, RopeMode::Neox);

  const std::vector<float> g = rand_floats(101, 15), u = rand_floats(101, 16);
  out.emplace_back(g.size());
  be.glu(g.data(), u.data(), out.back().data(), 101, FfnAct::SiLU);
  out.push_back(g);
  be.add(out.back().data(), u.data(), 101);
  return out;
}

class OpenclProgramCache : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_device()) GTEST_SKIP() << "no OpenCL device";
  }
  TempDir dir_;
};

TEST_F(OpenclProgramCache, second_start_loads_programs_and_verdict_and_computes_the_same) {
  std::string err;
  auto cold = start(cached(dir_.path), &err);
  EXPECT_FALSE(cold->programs_from_cache());
  EXPECT_TRUE(cold->self_check_ran());
  EXPECT_FALSE(cold->verdict_from_cache());
  EXPECT_EQ(err, "");  // a missing entry is the normal first start: nothing to say
  const std::vector<fs::path> files = dir_.files();
  ASSERT_EQ(files.size(), 1u);  // the entry, and no temporary file left behind
  EXPECT_EQ(files[0].filename().string().rfind("opencl-", 0), 0u) << files[0];
  EXPECT_EQ(files[0].extension(), ".bin");

  auto warm = start(cached(dir_.path), &err);
  EXPECT_TRUE(warm->programs_from_cache());
  EXPECT_TRUE(warm->verdict_from_cache());
  EXPECT_FALSE(warm->self_check_ran());
  EXPECT_EQ(err, "");
  EXPECT_TRUE(warm->cpu_fallbacks().empty());
  EXPECT_EQ(dir_.files().size(), 1u);

  // The kernels from binaries against the ones built from source: the same code, so the same bits.
  const auto a = op_outputs(*cold), b = op_outputs(*warm);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i], b[i]) << "op output " << i;
    EXPECT_NE(std::count(a[i].begin(), a[i].end(), 0.0f), std::ptrdiff_t(a[i].size())) << i;
  }
  // And both are right: the warm backend's matmul against the CPU backend's float path.
  ThreadPool pool(1);
  CpuBackend cpu(pool, ActivationMode::F32, 0);
  const std::vector<uint8_t> q = q4_0_rows(96, 37, 7);
  Weight w;
  w.name = "q4_0";
  w.type = GgmlType::Q4_0;
  w.data = q.data();
  w.n_in = 96;
  w.n_out = 37;
  w.row_bytes = row_size(GgmlType::Q4_0, 96);
  const std::vector<float> x = rand_floats(5 * 96, 11);
  std::vector<float> ref(5 * 37);
  cpu.matmul(w, x.data(), 5, ref.data());
  double diff = 0, mag = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::abs(double(ref[i]) - b[0][i]));
    mag = std::max(mag, std::abs(double(ref[i])));
  }
  EXPECT_LE(diff, 1e-5 * mag);  // float sums of 96 products in another order: far below this
}

TEST_F(OpenclProgramCache, corrupt_truncated_and_mismatching_entries_are_rebuilt) {
  start(cached(dir_.path));
  ASSERT_EQ(dir_.files().size(), 1u);
  const fs::path entry = dir_.files()[0];
  const std::vector<uint8_t> good = read_file(entry);
  // The entry of another key (an f32 KV cache changes the program text): valid, but not this one's.
  OpenclBackendOptions f32 = cached(dir_.path);
  f32.kv_type = GgmlType::F32;
  start(f32);
  ASSERT_EQ(dir_.files().size(), 2u);
  std::vector<uint8_t> other;
  for (const fs::path& p : dir_.files()) {
    if (p != entry) other = read_file(p);
  }

  std::vector<uint8_t> flipped = good;
  flipped[flipped.size() / 2] ^= 0x10;
  const std::vector<uint8_t> truncated(good.begin(), good.begin() + std::ptrdiff_t(good.size() / 3));
  const struct {
    const char* name;
    std::vector<uint8_t> bytes;
    const char* why;
  } cases[] = {
      {"truncated", truncated, "bytes where its header says"},
      {"flipped byte", flipped, "hash mismatch"},
      {"other key", other, "made for another device"},
      {"empty", {}, "truncated"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    write_file(entry, c.bytes);
    std::string err;
    auto be = start(cached(dir_.path), &err);
    EXPECT_FALSE(be->programs_from_cache());
    EXPECT_TRUE(be->self_check_ran());
    EXPECT_TRUE(be->cpu_fallbacks().empty());
    EXPECT_EQ(count_lines(err, "\n"), 1u) << err;  // one line, a note
    EXPECT_EQ(err.rfind("note: OpenCL program cache: ", 0), 0u) << err;
    EXPECT_NE(err.find(c.why), std::string::npos) << err;
    // Overwritten with a good entry, which the next start uses.
    EXPECT_NE(read_file(entry), c.bytes);
    EXPECT_TRUE(start(cached(dir_.path))->programs_from_cache());
  }
  EXPECT_EQ(dir_.files().size(), 2u);
}

TEST_F(OpenclProgramCache, binary_the_driver_rejects_is_rebuilt) {
  start(cached(dir_.path));
  const fs::path entry = dir_.files().at(0);
  // A well-formed entry for the right key whose binary is not one: only the driver can tell.
  const std::vector<uint8_t> good = read_file(entry);
  uint64_t key_bytes = 0;
  std::memcpy(&key_bytes, good.data() + 16, 8);
  const std::string key(good.begin() + 40, good.begin() + 40 + std::ptrdiff_t(key_bytes));
  std::string why;
  ASSERT_TRUE(decode_entry(good, key, why)) << why;
  CacheEntry bad;
  bad.binaries = {std::vector<uint8_t>(4096, 0x5a)};
  bad.checked = true;
  write_file(entry, encode_entry(key, bad));
  std::string err;
  auto be = start(cached(dir_.path), &err);
  EXPECT_FALSE(be->programs_from_cache());
  EXPECT_TRUE(be->self_check_ran());
  EXPECT_EQ(count_lines(err, "\n"), 1u) << err;
  EXPECT_NE(err.find("the driver rejected a cached binary"), std::string::npos) << err;
  EXPECT_TRUE(start(cached(dir_.path))->programs_from_cache());
}

TEST_F(OpenclProgramCache, unwritable_or_missing_directory_does_not_fail_the_start) {
  // Missing: made on the first store.
  const fs::path nested = dir_.path / "a" / "b";
  start(cached(nested));
  EXPECT_TRUE(start(cached(nested))->programs_from_cache());

  // A directory that cannot be made (a path through a regular file: fails for root too).
  write_file(dir_.path / "file", {1, 2, 3});
  std::string err;
  auto be = start(cached(dir_.path / "file" / "sub"), &err);
  EXPECT_FALSE(be->programs_from_cache());
  EXPECT_TRUE(be->cpu_fallbacks().empty());
  EXPECT_EQ(count_lines(err, "\n"), 1u) << err;
  EXPECT_EQ(err.rfind("warning: OpenCL program cache: cannot write", 0), 0u) << err;
  EXPECT_EQ(op_outputs(*be).size(), 7u);  // and it computes

  // A read-only directory (root may write anyway: then there is nothing to show).
  if (geteuid() != 0) {
    const fs::path ro = dir_.path / "ro";
    fs::create_directory(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    auto r = start(cached(ro), &err);
    EXPECT_FALSE(r->programs_from_cache());
    EXPECT_EQ(err.rfind("warning: OpenCL program cache: cannot write", 0), 0u) << err;
    EXPECT_TRUE(fs::is_empty(ro));
    fs::permissions(ro, fs::perms::owner_all);
  }
}

TEST_F(OpenclProgramCache, off_touches_no_disk_and_refresh_rewrites) {
  const fs::path d = dir_.path / "never";
  auto off = start(cached(d, Mode::Off));
  EXPECT_FALSE(off->programs_from_cache());
  EXPECT_TRUE(off->self_check_ran());
  EXPECT_FALSE(fs::exists(d));

  start(cached(dir_.path));
  const fs::path entry = dir_.files().at(0);
  const auto before = fs::last_write_time(entry);
  write_file(entry, {});  // refresh does not even read it, so says nothing about it
  std::string err;
  auto re = start(cached(dir_.path, Mode::Refresh), &err);
  EXPECT_FALSE(re->programs_from_cache());
  EXPECT_TRUE(re->self_check_ran());
  EXPECT_EQ(err, "");
  EXPECT_GE(fs::last_write_time(entry), before);
  EXPECT_TRUE(start(cached(dir_.path))->programs_from_cache());
}

TEST_F(OpenclProgramCache, self_check_can_be_forced_on_cached_programs) {
  start(cached(dir_.path));
  OpenclBackendOptions o = cached(dir_.path);
  o.reuse_verdict = false;
  auto be = start(o);
  EXPECT_TRUE(be->programs_from_cache());
  EXPECT_TRUE(be->self_check_ran());
  EXPECT_FALSE(be->verdict_from_cache());
}

TEST_F(OpenclProgramCache, cached_verdict_of_a_broken_kernel_applies_its_fallback_without_a_check) {
  OpenclBackendOptions o = cached(dir_.path);
  o.test_kernel_name = "rmsnorm";
  o.test_kernel_source = test::kBrokenRmsnorm;
  std::string err;
  auto cold = start(o, &err);
  EXPECT_TRUE(cold->self_check_ran());
  EXPECT_EQ(cold->cpu_fallbacks(), std::vector<std::string>{"rmsnorm"});
  EXPECT_NE(err.find("warning: OpenCL kernel rmsnorm failed its self-check"), std::string::npos) << err;

  auto warm = start(o, &err);
  EXPECT_TRUE(warm->programs_from_cache());
  EXPECT_TRUE(warm->verdict_from_cache());
  EXPECT_FALSE(warm->self_check_ran());
  EXPECT_EQ(warm->cpu_fallbacks(), std::vector<std::string>{"rmsnorm"});
  // The same warning, saying where the verdict came from.
  EXPECT_EQ(count_lines(err, "\n"), 1u) << err;
  EXPECT_NE(err.find("warning: OpenCL kernel rmsnorm failed its self-check"), std::string::npos) << err;
  EXPECT_NE(err.find("(verdict from the program cache)"), std::string::npos) << err;
  // The fallback is in force: the CPU backend's result exactly.
  ThreadPool pool(1);
  CpuBackend cpu(pool, ActivationMode::F32, 0);
  const std::vector<float> x = rand_floats(3 * 77, 1), w = rand_floats(77, 2);
  std::vector<float> a(x.size()), b(x.size());
  cpu.rmsnorm(x.data(), w.data(), a.data(), 3, 77, 1e-6f);
  warm->rmsnorm(x.data(), w.data(), b.data(), 3, 77, 1e-6f);
  EXPECT_EQ(a, b);

  // The hook's source is part of the key: the plain backend does not find the broken build's entry (and
  // its verdict), nor does a hook with another source.
  auto plain = start(cached(dir_.path));
  EXPECT_FALSE(plain->programs_from_cache());
  EXPECT_TRUE(plain->cpu_fallbacks().empty());
  o.test_kernel_source = std::string(opencl::kernel_source("rmsnorm"));  // the real kernel, as the hook
  auto fixed = start(o, &err);
  EXPECT_FALSE(fixed->programs_from_cache());
  EXPECT_TRUE(fixed->self_check_ran());
  EXPECT_TRUE(fixed->cpu_fallbacks().empty()) << err;
  EXPECT_EQ(dir_.files().size(), 3u);
}

TEST_F(OpenclProgramCache, profile_and_cache_type_are_part_of_the_key) {
  start(cached(dir_.path));
  OpenclBackendOptions o = cached(dir_.path);
  o.profile = "mali-valhall";
  EXPECT_FALSE(start(o)->programs_from_cache());
  EXPECT_TRUE(start(o)->programs_from_cache());
  o.kv_type = GgmlType::F32;
  EXPECT_FALSE(start(o)->programs_from_cache());
  EXPECT_EQ(dir_.files().size(), 3u);
}

// `tilellm bench`'s start times: cold writes the entry that warm then loads; with the cache off only cold.
TEST_F(OpenclProgramCache, bench_start_times_are_cold_then_warm_from_the_entry_cold_wrote) {
  SessionOptions so;
  so.backend = "opencl";
  so.device = test::opencl_test_device();
  so.backend_options = make_backend_options(*find_backend("opencl"), {{"--cl-cache", dir_.path.string()}});
  ::testing::internal::CaptureStderr();
  const StartTimes t = bench::measure_start(so);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_GT(t.cold_ms, 0.0);
  EXPECT_GT(t.warm_ms, 0.0);
  EXPECT_EQ(dir_.files().size(), 1u);
  EXPECT_TRUE(start(cached(dir_.path))->programs_from_cache());  // the entry a session then uses

  so.backend_options = make_backend_options(*find_backend("opencl"), {{"--cl-cache", "off"}});
  const StartTimes off = bench::measure_start(so);
  EXPECT_GT(off.cold_ms, 0.0);
  EXPECT_LT(off.warm_ms, 0.0);
  EXPECT_FALSE(fs::exists(dir_.path / "off"));
}

// Stores racing with loads of the same key (threads here; processes behave alike, since the rename is what
// makes it atomic): every load finds a whole entry, one of the two written, and never reports a damaged one.
TEST(OpenclProgramCacheFile, concurrent_stores_and_loads_never_see_a_partial_entry) {
  TempDir dir;
  const ProgramCache cache({Mode::On, dir.path.string()}, "one key", "opencl", "OpenCL program cache");
  CacheEntry a, b;
  a.binaries = {std::vector<uint8_t>(3 << 20, 0xa1)};  // MiBs, so that a write takes a while
  b.binaries = {std::vector<uint8_t>((3 << 20) + 17, 0xb2)};
  b.checked = true;
  ASSERT_TRUE(cache.store(a));
  ::testing::internal::CaptureStderr();
  std::vector<std::thread> writers;
  for (const CacheEntry* e : {&a, &b}) {
    writers.emplace_back([&cache, e] {
      for (int i = 0; i < 20; ++i) cache.store(*e);
    });
  }
  int loads = 0, whole = 0;
  for (; loads < 200; ++loads) {
    const std::optional<CacheEntry> got = cache.load();
    if (got && (got->binaries == a.binaries || got->binaries == b.binaries)) ++whole;
  }
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(whole, loads);
  EXPECT_EQ(dir.files().size(), 1u);  // no temporary file left behind
}

// The file format without a device: a round trip, and every single flipped byte and every truncation of an
// entry rejected.
TEST(OpenclProgramCacheFile, every_flipped_byte_and_truncation_is_rejected) {
  CacheEntry e;
  e.binaries = {std::vector<uint8_t>(301, 7), std::vector<uint8_t>{1, 2, 3}};
  for (size_t i = 0; i < e.binaries[0].size(); ++i) e.binaries[0][i] = uint8_t(i * 31 + 5);
  e.checked = true;
  e.failed = {{"rmsnorm", 0.97}, {"matvec_q4_0", INFINITY}};
  const std::string key = "version 1:x\nprogram 5:abcde\n";
  const std::vector<uint8_t> file = encode_entry(key, e);
  std::string why;
  const auto back = decode_entry(file, key, why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->binaries, e.binaries);
  EXPECT_TRUE(back->checked);
  ASSERT_EQ(back->failed.size(), 2u);
  EXPECT_EQ(back->failed[0].kernel, "rmsnorm");
  EXPECT_EQ(back->failed[0].error, 0.97);
  EXPECT_EQ(back->failed[1].kernel, "matvec_q4_0");
  EXPECT_TRUE(std::isinf(back->failed[1].error));
  EXPECT_FALSE(decode_entry(file, "version 1:x\nprogram 5:abcdf\n", why));
  EXPECT_EQ(why, "made for another device, driver, profile or source");

  for (size_t i = 0; i < file.size(); ++i) {
    for (uint8_t bit : {uint8_t(1), uint8_t(0x80)}) {
      std::vector<uint8_t> f = file;
      f[i] ^= bit;
      EXPECT_FALSE(decode_entry(f, key, why)) << "byte " << i;
    }
  }
  for (size_t n = 0; n < file.size(); ++n) {
    const std::vector<uint8_t> f(file.begin(), file.begin() + std::ptrdiff_t(n));
    EXPECT_FALSE(decode_entry(f, key, why)) << "length " << n;
  }
  std::vector<uint8_t> longer = file;
  longer.push_back(0);
  EXPECT_FALSE(decode_entry(longer, key, why));
}

TEST(OpenclProgramCacheFile, default_directory_follows_the_environment) {
  struct Env {  // sets a variable for the test and restores it after
    std::string name, old;
    bool had;
    Env(const char* n, const char* v) : name(n), had(std::getenv(n) != nullptr) {
      if (had) old = std::getenv(n);
      v ? setenv(n, v, 1) : unsetenv(n);
    }
    ~Env() { had ? setenv(name.c_str(), old.c_str(), 1) : unsetenv(name.c_str()); }
  };
  Env a("TILELLM_CACHE_DIR", nullptr), b("XDG_CACHE_HOME", nullptr), c("HOME", "/home/u");
  EXPECT_EQ(default_cache_dir("opencl"), "/home/u/.cache/tilellm/opencl");
  {
    Env x("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(default_cache_dir("opencl"), "/xdg/tilellm/opencl");
    Env t("TILELLM_CACHE_DIR", "/t/cl");
    EXPECT_EQ(default_cache_dir("opencl"), "/t/cl");
  }
  Env h("HOME", nullptr);
  EXPECT_EQ(default_cache_dir("opencl"), "");
  // With no directory to use, the cache is off (with a warning) rather than writing somewhere unexpected.
  ::testing::internal::CaptureStderr();
  const ProgramCache cache(ProgramCacheOptions{Mode::On, ""}, "key", "opencl", "OpenCL program cache");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(cache.enabled());
  EXPECT_FALSE(cache.load());
  EXPECT_NE(err.find("warning: OpenCL program cache: no directory"), std::string::npos) << err;
}

}  // namespace
}  // namespace tilellm
