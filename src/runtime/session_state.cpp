// Session::save_state / load_state: a session's cached tokens, their KV rows and the last logits in a file
// (llama.cpp's --prompt-cache idea: a long prompt evaluated once, later runs start from it).
//
// File layout (little-endian, the byte order of every target this engine builds for):
//   offset  size  field
//   0       8     magic "TLLMSESS"
//   8       4     u32 format version (kVersion)
//   12      4     u32 KV cache element type (GGML type id: 0 F32, 1 F16)
//   16      8     u64 model fingerprint (runtime/model_fingerprint.h)
//   24      8     i64 n_layer            the cache's geometry ...
//   32      8     i64 kv_dim
//   40      8     i64 n_ctx
//   48      8     i64 n_vocab            ... and the vocabulary of the logits
//   56      8     i64 n_tokens           the cached tokens (positions [0, n_tokens))
//   64      4     u32 has_logits         1: the logits of the last token follow the tokens
//   68      4     u32 name_len           the model's name (general.name, else the file name), for messages
//   72      name_len bytes
//   then    u64 app_len, then app_len bytes: what the caller saved beside the session (the chat's messages)
//           i32 tokens[n_tokens]
//           f32 logits[n_vocab]                      when has_logits
//           KV rows: for layer < n_layer, for K then V: rows [0, n_tokens) of kv_dim elements each
//           u64 XXH3-64 of every byte before it
// A file is accepted only for a session of the same model (fingerprint), context size and cache type; its
// size must be exactly what its header implies and its checksum must match, so a truncated or damaged file
// is refused before the session is touched.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/error.h"
#include "runtime/model_fingerprint.h"
#include "runtime/session.h"

namespace tilellm {
namespace {

constexpr char kMagic[8] = {'T', 'L', 'L', 'M', 'S', 'E', 'S', 'S'};
constexpr uint32_t kVersion = 1;
constexpr size_t kFixedHeader = 72;
constexpr size_t kMaxName = 256;
constexpr uint64_t kMaxAppData = uint64_t(1) << 32;
std::string model_label(const Model& m) {
  std::string name = m.config().name;
  if (name.empty()) name = std::filesystem::path(m.file().path()).filename().string();
  if (name.size() > kMaxName) name.resize(kMaxName);
  return name;
}

// A file written through a temporary name in the same folder, renamed over `path` by commit(); removed when
// the writer goes away uncommitted (a failed save leaves nothing behind). Every write hashes what it writes.
class StateWriter {
 public:
  explicit StateWriter(const std::string& path) : path_(path), tmp_(path + ".tmp") {
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (!f_) fail_as(ErrorKind::Io, "{}: cannot write the session file: {}", path_, std::strerror(errno));
    XXH3_64bits_reset(&hash_);
  }
  ~StateWriter() {
    if (f_) {
      std::fclose(f_);
      std::remove(tmp_.c_str());
    }
  }
  void write(const void* p, size_t n) {
    if (n == 0) return;
    XXH3_64bits_update(&hash_, p, n);
    if (std::fwrite(p, 1, n, f_) != n)
      fail_as(ErrorKind::Io, "{}: cannot write the session file: {}", path_, std::strerror(errno));
  }
  template <typename T>
  void put(T v) {
    write(&v, sizeof v);
  }
  void commit() {
    const uint64_t sum = XXH3_64bits_digest(&hash_);
    write(&sum, sizeof sum);
    const bool ok = std::fflush(f_) == 0 && std::fclose(f_) == 0;
    f_ = nullptr;
    if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
      const int err = errno;
      std::remove(tmp_.c_str());
      fail_as(ErrorKind::Io, "{}: cannot write the session file: {}", path_, std::strerror(err));
    }
  }

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  XXH3_state_t hash_;
};

// A session file mapped read-only.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail_as(ErrorKind::Io, "{}: cannot open the session file: {}", path, std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      fail_as(ErrorKind::Io, "{}: not a regular file", path);
    }
    size_ = size_t(st.st_size);
    if (size_ > 0) {
      void* m = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (m == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        fail_as(ErrorKind::Io, "{}: cannot map the session file: {}", path, std::strerror(err));
      }
      data_ = static_cast<const uint8_t*>(m);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

template <typename T>
T read_at(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

// The geometry a session's file must have, and the sizes that follow from n_tokens.
struct Layout {
  uint32_t kv_type;
  int64_t n_layer, kv_dim, n_ctx, n_vocab;
  size_t row_bytes;
};

}  // namespace

void Session::save_state(const std::string& path, std::string_view app_data) {
  const int64_t n = n_past_;
  const int64_t V = model_.config().n_vocab;
  // Where the rows are current: the device's cache when the backend keeps one (then they come down, into
  // the host cache when it has storage, else into a temporary copy), the host cache otherwise.
  std::unique_ptr<KvCache> tmp;
  KvCache* src = &kv_;
  if (!backend_->needs_host_kv()) {
    if (kv_.has_storage()) {
      backend_->kv_to_host(kv_, std::min(host_kv_, n), n);
      host_kv_ = n;
    } else {
      tmp = std::make_unique<KvCache>(kv_.n_layer(), kv_.n_ctx(), model_.config().n_head_kv,
                                      model_.config().head_dim, kv_.type());
      backend_->kv_to_host(*tmp, 0, n);
      src = tmp.get();
    }
  }
  const std::string name = model_label(model_);
  StateWriter w(path);
  w.write(kMagic, sizeof kMagic);
  w.put<uint32_t>(kVersion);
  w.put<uint32_t>(uint32_t(kv_.type()));
  w.put<uint64_t>(model_fingerprint(model_));
  w.put<int64_t>(kv_.n_layer());
  w.put<int64_t>(kv_.kv_dim());
  w.put<int64_t>(kv_.n_ctx());
  w.put<int64_t>(V);
  w.put<int64_t>(n);
  w.put<uint32_t>(has_logits_ ? 1 : 0);
  w.put<uint32_t>(uint32_t(name.size()));
  w.write(name.data(), name.size());
  w.put<uint64_t>(app_data.size());
  w.write(app_data.data(), app_data.size());
  w.write(tokens_.data(), size_t(n) * sizeof(int32_t));
  if (has_logits_) w.write(logits(), size_t(V) * sizeof(float));
  for (int64_t l = 0; l < kv_.n_layer(); ++l) {
    for (int kind = 0; kind < 2; ++kind) w.write(src->plane(l, kind), size_t(n) * src->row_bytes());
  }
  w.commit();
}

void Session::load_state(const std::string& path, std::string* app_data) {
  const MappedFile f(path);
  const uint8_t* p = f.data();
  const size_t size = f.size();
  if (size < sizeof kMagic || std::memcmp(p, kMagic, sizeof kMagic) != 0)
    fail_as(ErrorKind::Corrupt, "{}: not a TileLLM session file (no 'TLLMSESS' at its start)", path);
  if (size < kFixedHeader)
    fail_as(ErrorKind::Corrupt, "{}: truncated session file: {} bytes, shorter than its {}-byte header", path,
            size, kFixedHeader);
  const uint32_t version = read_at<uint32_t>(p, 8);
  if (version != kVersion)
    fail_as(ErrorKind::Mismatch, "{}: session file format {} (this version of TileLLM reads format {})", path,
            version, kVersion);
  const uint32_t name_len = read_at<uint32_t>(p, 68);
  if (name_len > kMaxName || size < kFixedHeader + name_len)
    fail_as(ErrorKind::Corrupt, "{}: truncated or damaged session file header", path);
  const std::string saved_name(reinterpret_cast<const char*>(p + kFixedHeader), name_len);
  const std::string this_name = model_label(model_);
  const uint64_t fp = read_at<uint64_t>(p, 16);
  const Layout want{uint32_t(kv_.type()), kv_.n_layer(),           kv_.kv_dim(),
                    kv_.n_ctx(),          model_.config().n_vocab, kv_.row_bytes()};
  if (fp != model_fingerprint(model_) || read_at<int64_t>(p, 24) != want.n_layer ||
      read_at<int64_t>(p, 32) != want.kv_dim || read_at<int64_t>(p, 48) != want.n_vocab) {
    fail_as(ErrorKind::Mismatch,
            "{}: the session was saved from another model ('{}'); this session runs '{}' ({}): the model "
            "files differ",
            path, saved_name, this_name, model_.file().path());
  }
  const int64_t saved_ctx = read_at<int64_t>(p, 40);
  if (saved_ctx != want.n_ctx)
    fail_as(ErrorKind::Mismatch,
            "{}: the session was saved with a context of {} tokens; this session has {} (use -c {})", path,
            saved_ctx, want.n_ctx, saved_ctx);
  const uint32_t saved_type = read_at<uint32_t>(p, 12);
  if (saved_type != want.kv_type) {
    auto name = [](uint32_t t) {
      return t == uint32_t(GgmlType::F32)   ? "f32"
             : t == uint32_t(GgmlType::F16) ? "f16"
                                            : "of an unknown type";
    };
    fail_as(ErrorKind::Mismatch,
            "{}: the session's KV cache is {}; this session's is {} (use --cache-type {})", path,
            name(saved_type), name(want.kv_type), name(saved_type));
  }
  const int64_t n = read_at<int64_t>(p, 56);
  const uint32_t has_logits = read_at<uint32_t>(p, 64);
  if (n < 0 || n > want.n_ctx || has_logits > 1)
    fail_as(ErrorKind::Corrupt, "{}: damaged session file: {} tokens in a context of {}", path, n,
            want.n_ctx);
  const size_t app_at = kFixedHeader + name_len + sizeof(uint64_t);
  if (size < app_at) fail_as(ErrorKind::Corrupt, "{}: truncated session file header", path);
  const uint64_t app_len = read_at<uint64_t>(p, app_at - sizeof(uint64_t));
  if (app_len > kMaxAppData || app_len > size - app_at)
    fail_as(ErrorKind::Corrupt, "{}: truncated or damaged session file: {} bytes of saved data claimed", path,
            app_len);
  const size_t tokens_at = app_at + size_t(app_len);
  const size_t logits_at = tokens_at + size_t(n) * sizeof(int32_t);
  const size_t kv_at = logits_at + (has_logits ? size_t(want.n_vocab) * sizeof(float) : 0);
  const size_t plane_rows = size_t(n) * want.row_bytes;
  const size_t expected = kv_at + size_t(2 * want.n_layer) * plane_rows + sizeof(uint64_t);
  if (size != expected)
    fail_as(ErrorKind::Corrupt, "{}: {} session file: {} bytes, but a session of {} tokens takes {}", path,
            size < expected ? "truncated" : "damaged", size, n, expected);
  if (XXH3_64bits(p, size - sizeof(uint64_t)) != read_at<uint64_t>(p, size - sizeof(uint64_t)))
    fail_as(ErrorKind::Corrupt, "{}: damaged session file: its checksum does not match its contents", path);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = read_at<int32_t>(p, tokens_at + size_t(i) * sizeof(int32_t));
    if (t < 0 || t >= want.n_vocab)
      fail_as(ErrorKind::Corrupt, "{}: damaged session file: token id {} outside the vocabulary", path, t);
  }

  // Accepted: from here on the session takes the file's state.
  std::unique_ptr<KvCache> tmp;
  KvCache* dst = &kv_;
  const bool on_device = !backend_->needs_host_kv();
  if (on_device && !kv_.has_storage()) {
    tmp = std::make_unique<KvCache>(kv_.n_layer(), kv_.n_ctx(), model_.config().n_head_kv,
                                    model_.config().head_dim, kv_.type());
    dst = tmp.get();
  }
  const uint8_t* rows = p + kv_at;
  for (int64_t l = 0; l < want.n_layer; ++l) {
    for (int kind = 0; kind < 2; ++kind, rows += plane_rows)
      std::memcpy(dst->plane(l, kind), rows, plane_rows);
  }
  if (on_device) backend_->kv_to_device(*dst, 0, n);
  tokens_.resize(size_t(n));
  if (n > 0) std::memcpy(tokens_.data(), p + tokens_at, size_t(n) * sizeof(int32_t));
  n_past_ = n;
  host_kv_ = dev_kv_ = n;
  has_logits_ = has_logits != 0;
  last_n_ = 1;
  has_hidden_ = false;  // the scratch holds no pass of these tokens
  if (has_logits_) std::memcpy(logits_.as<float>(), p + logits_at, size_t(want.n_vocab) * sizeof(float));
  if (app_data) app_data->assign(reinterpret_cast<const char*>(p + app_at), size_t(app_len));
}

}  // namespace tilellm
