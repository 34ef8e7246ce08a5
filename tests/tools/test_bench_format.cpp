// `tilellm bench` output: llama-bench's field names and parseable md/csv/json/jsonl for a synthetic result,
// llama-bench's statistics, and the comma-list arguments. No timing is asserted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "runtime/bench.h"

namespace tilellm::bench {
namespace {

Row synthetic_row(const TestSpec& t) {
  Row r;
  r.build_commit = "abc1234";
  r.cpu_info = "Test CPU \"quoted\", with comma";
  r.model_filename = "models/m.gguf";
  r.model_type = "llama 135M Q4_0";
  r.model_size = 123456789;
  r.model_n_params = 134515008;
  r.n_batch = 64;
  r.n_threads = 2;
  r.test = t;
  r.test_time = "2026-01-01T00:00:00Z";
  r.samples_ns = {1000000000, 2000000000};  // 1 s and 2 s
  r.cpu_set = "0-1";
  r.weight_bytes_per_token = 1000;
  return r;
}

// Header, rows and footer in the order a run prints them.
std::string print(Printer& p, const std::vector<Row>& rows) {
  std::string out = p.header();
  for (const Row& r : rows) out += p.row(r);
  out += p.footer();
  return out;
}

// Splits one CSV line into fields, honouring "" quotes.
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

const char* const kLlamaBenchFields[] = {"build_commit", "cpu_info",       "model_filename", "model_type",
                                         "model_size",   "model_n_params", "n_batch",        "n_threads",
                                         "n_prompt",     "n_gen",          "n_depth",        "test_time",
                                         "avg_ns",       "stddev_ns",      "avg_ts",         "stddev_ts"};
const char* const kOurFields[] = {"backend",       "cpu_set",       "weights_mode", "activations", "commit",
                                  "start_cold_ms", "start_warm_ms", "pace",         "pace_target"};

TEST(BenchFormat, parse_int_list_reads_comma_lists) {
  EXPECT_EQ(parse_int_list("128,512", "-p"), (std::vector<int64_t>{128, 512}));
  EXPECT_EQ(parse_int_list("0", "-p"), (std::vector<int64_t>{0}));
  for (const char* bad : {"", "12a", "-1", "1,,2", "1,", "x"}) {
    EXPECT_THROW(parse_int_list(bad, "-p"), Error) << bad;
  }
}

TEST(BenchFormat, make_tests_follows_llama_bench_order_and_skips_zeros) {
  const auto t = make_tests({128, 0}, {64}, {512, 128}, {0, 256});
  const std::vector<TestSpec> want = {{128, 0, 0},   {0, 64, 0},   {512, 128, 0},
                                      {128, 0, 256}, {0, 64, 256}, {512, 128, 256}};
  EXPECT_EQ(t, want);
  EXPECT_THROW(make_tests({}, {}, {512}, {0}), Error);
}

TEST(BenchFormat, test_names_are_llama_bench_labels) {
  EXPECT_EQ(test_name({128, 0, 0}), "pp128");
  EXPECT_EQ(test_name({0, 64, 0}), "tg64");
  EXPECT_EQ(test_name({512, 128, 0}), "pp512+tg128");
  EXPECT_EQ(test_name({0, 64, 1024}), "tg64 @ d1024");
}

TEST(BenchFormat, statistics_match_llama_bench_definitions) {
  const Row r = synthetic_row({0, 64, 0});
  EXPECT_EQ(r.avg_ns(), 1500000000u);
  EXPECT_EQ(r.stddev_ns(), 707106781u);  // sample stddev of {1e9, 2e9}
  ASSERT_EQ(r.samples_ts().size(), 2u);
  EXPECT_DOUBLE_EQ(r.samples_ts()[0], 64.0);
  EXPECT_DOUBLE_EQ(r.samples_ts()[1], 32.0);
  EXPECT_DOUBLE_EQ(r.avg_ts(), 48.0);
  EXPECT_NEAR(r.stddev_ts(), 22.627417, 1e-6);
  EXPECT_EQ(stddev({5.0}), 0.0);
  EXPECT_EQ(parse_format("jsonl"), Format::Jsonl);
  EXPECT_THROW(parse_format("sql"), Error);
}

TEST(BenchFormat, csv_has_llama_bench_header_and_one_value_per_field) {
  auto p = make_printer(Format::Csv);
  const std::string out = print(*p, {synthetic_row({128, 0, 0})});
  const auto ls = lines(out);
  ASSERT_EQ(ls.size(), 2u);
  const auto header = csv_fields(ls[0]);
  EXPECT_EQ(header, field_names());
  for (const char* f : kLlamaBenchFields)
    EXPECT_NE(std::find(header.begin(), header.end(), f), header.end()) << f;
  for (const char* f : kOurFields) EXPECT_NE(std::find(header.begin(), header.end(), f), header.end()) << f;
  const auto row = csv_fields(ls[1]);
  ASSERT_EQ(row.size(), header.size());
  auto at = [&](const std::string& name) {
    return row[size_t(std::find(header.begin(), header.end(), name) - header.begin())];
  };
  EXPECT_EQ(at("cpu_info"), "Test CPU \"quoted\", with comma");
  EXPECT_EQ(at("n_prompt"), "128");
  EXPECT_EQ(at("n_gen"), "0");
  EXPECT_EQ(at("avg_ns"), "1500000000");
  EXPECT_EQ(at("weights_mode"), "native");
  EXPECT_EQ(at("commit"), "abc1234");
}

TEST(BenchFormat, json_is_an_array_of_typed_rows_with_samples) {
  auto p = make_printer(Format::Json);
  const std::string out = print(*p, {synthetic_row({128, 0, 0}), synthetic_row({0, 64, 0})});
  const auto j = nlohmann::json::parse(out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  for (const auto& r : j) {
    for (const char* f : kLlamaBenchFields) EXPECT_TRUE(r.contains(f)) << f;
    for (const char* f : kOurFields) EXPECT_TRUE(r.contains(f)) << f;
    EXPECT_TRUE(r["model_filename"].is_string());
    EXPECT_TRUE(r["n_prompt"].is_number_integer());
    EXPECT_TRUE(r["model_size"].is_number_integer());
    EXPECT_TRUE(r["avg_ts"].is_number());
    ASSERT_TRUE(r["samples_ns"].is_array());
    ASSERT_TRUE(r["samples_ts"].is_array());
    EXPECT_EQ(r["samples_ns"].size(), 2u);
    EXPECT_EQ(r["samples_ts"].size(), 2u);
  }
  EXPECT_EQ(j[1]["n_gen"], 64);
  EXPECT_NEAR(j[1]["avg_ts"].get<double>(), 48.0, 1e-6);
  // An empty run is still valid JSON.
  auto q = make_printer(Format::Json);
  EXPECT_TRUE(nlohmann::json::parse(print(*q, {})).empty());
}

TEST(BenchFormat, jsonl_is_one_object_per_line) {
  auto p = make_printer(Format::Jsonl);
  const std::string out = print(*p, {synthetic_row({512, 128, 0}), synthetic_row({0, 64, 0})});
  const auto ls = lines(out);
  ASSERT_EQ(ls.size(), 2u);
  const auto r = nlohmann::json::parse(ls[0]);
  EXPECT_EQ(r["n_prompt"], 512);
  EXPECT_EQ(r["n_gen"], 128);
  EXPECT_EQ(r["cpu_set"], "0-1");
  EXPECT_EQ(nlohmann::json::parse(ls[1])["n_gen"], 64);
}

TEST(BenchFormat, markdown_table_has_llama_bench_columns) {
  auto p = make_printer(Format::Md);
  const std::string out = print(*p, {synthetic_row({512, 128, 0})});
  const auto ls = lines(out);
  ASSERT_GE(ls.size(), 3u);
  std::vector<std::string> titles;
  std::istringstream h(ls[0]);
  std::string cell;
  while (std::getline(h, cell, '|')) {
    const size_t b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
    if (b != std::string::npos) titles.push_back(cell.substr(b, e - b + 1));
  }
  EXPECT_EQ(titles,
            (std::vector<std::string>{"model", "size", "params", "backend", "threads", "test", "t/s"}));
  EXPECT_EQ(ls[1].find_first_not_of("|-: "), std::string::npos);
  EXPECT_NE(ls[2].find("llama 135M Q4_0"), std::string::npos);
  EXPECT_NE(ls[2].find("117.74 MiB"), std::string::npos);
  EXPECT_NE(ls[2].find("134.52 M"), std::string::npos);
  EXPECT_NE(ls[2].find("pp512+tg128"), std::string::npos);
  EXPECT_NE(ls[2].find("480.00 ± 226.27"), std::string::npos);  // 640 tokens in 1 s and in 2 s
  EXPECT_NE(out.find("build: abc1234"), std::string::npos);
  // Every line of the table has the same number of cells.
  auto cells = [](const std::string& l) { return std::count(l.begin(), l.end(), '|'); };
  EXPECT_EQ(cells(ls[0]), cells(ls[1]));
  EXPECT_EQ(cells(ls[0]), cells(ls[2]));
}

TEST(BenchFormat, markdown_backend_names_the_device_and_a_converted_weights_mode) {
  Row r = synthetic_row({0, 16, 0});
  EXPECT_NE(print(*make_printer(Format::Md), {r}).find("| CPU "), std::string::npos);
  r.weights_mode = "int8b0";
  EXPECT_NE(print(*make_printer(Format::Md), {r}).find("| CPU int8b0 "), std::string::npos);
  r.weights_mode = "native";
  r.backend = "opencl:1:mali-valhall";
  EXPECT_NE(print(*make_printer(Format::Md), {r}).find("| OpenCL:1:mali-valhall "), std::string::npos);
}

// The OpenCL start times: numbers in CSV and JSON and a line under the Markdown table when measured; an
// empty cell, null and no line when not (the CPU backend); warm alone missing when the cache was off.
TEST(BenchFormat, start_times_appear_in_every_format_when_measured) {
  Row r = synthetic_row({0, 16, 0});
  auto csv_at = [](const std::string& out, const std::string& name) {
    const auto ls = lines(out);
    const auto header = csv_fields(ls.at(0)), row = csv_fields(ls.at(1));
    return row.at(size_t(std::find(header.begin(), header.end(), name) - header.begin()));
  };
  auto json_row = [](const Row& row) {
    return nlohmann::json::parse(print(*make_printer(Format::Jsonl), {row}));
  };
  EXPECT_EQ(csv_at(print(*make_printer(Format::Csv), {r}), "start_cold_ms"), "");
  EXPECT_TRUE(json_row(r)["start_cold_ms"].is_null());
  EXPECT_TRUE(json_row(r)["start_warm_ms"].is_null());
  EXPECT_EQ(print(*make_printer(Format::Md), {r}).find(" start: "), std::string::npos);

  r.backend = "opencl:0";
  r.start_cold_ms = 1234.56;
  r.start_warm_ms = 78.94;
  const std::string csv = print(*make_printer(Format::Csv), {r});
  EXPECT_EQ(csv_at(csv, "start_cold_ms"), "1234.6");
  EXPECT_EQ(csv_at(csv, "start_warm_ms"), "78.9");
  const auto j = nlohmann::json::parse(print(*make_printer(Format::Json), {r}));
  EXPECT_NEAR(j[0]["start_cold_ms"].get<double>(), 1234.6, 1e-9);
  EXPECT_NEAR(j[0]["start_warm_ms"].get<double>(), 78.9, 1e-9);
  const std::string md = print(*make_printer(Format::Md), {r});
  EXPECT_NE(
      md.find("OpenCL:0 start: cold 1234.6 ms (programs built from source, self-check run), warm 78.9 ms "
              "(from the program cache)"),
      std::string::npos)
      << md;
  EXPECT_LT(md.find(" start: "), md.find("build: abc1234"));  // below the table, before the build line

  r.start_warm_ms = -1;
  EXPECT_TRUE(json_row(r)["start_warm_ms"].is_null());
  EXPECT_EQ(json_row(r)["start_cold_ms"].get<double>(), 1234.6);
  EXPECT_NE(print(*make_printer(Format::Md), {r}).find("warm not measured (program cache off)"),
            std::string::npos);
}

TEST(BenchFormat, cpu_facts_are_filled) {
  EXPECT_FALSE(cpu_model_name().empty());
  const std::string set = cpu_affinity_list();
  EXPECT_FALSE(set.empty());
  EXPECT_EQ(set.find_first_not_of("0123456789,-"), std::string::npos) << set;
  EXPECT_EQ(file_type_name(2), "Q4_0");
  EXPECT_EQ(file_type_name(15), "Q4_K - Medium");
  EXPECT_EQ(utc_now_rfc3339().size(), 20u);
}

}  // namespace
}  // namespace tilellm::bench
