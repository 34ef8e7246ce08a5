// GGUF reader: maps the file and validates every count, length and offset before it is used, so a truncated
// or corrupt file ends in a tilellm::Error that names the file, the key or tensor, and the reason.
#include "format/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "base/error.h"

namespace tilellm {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxStringLen = uint64_t(1) << 30;

size_t gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL:
      return 1;
    case GgufType::UINT16:
    case GgufType::INT16:
      return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32:
      return 4;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64:
      return 8;
    default:
      return 0;
  }
}

bool is_integer(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::UINT16:
    case GgufType::INT16:
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::BOOL:
      return true;
    default:
      return false;
  }
}

// Reads a little-endian scalar of type t at p (unaligned) into the int/uint/float fields of v.
void decode_scalar(GgufType t, const uint8_t* p, GgufValue& v) {
  auto load = [p](auto tag) {
    decltype(tag) x;
    std::memcpy(&x, p, sizeof x);
    return x;
  };
  switch (t) {
    case GgufType::UINT8:
      v.u = load(uint8_t{});
      v.i = int64_t(v.u);
      break;
    case GgufType::INT8:
      v.i = load(int8_t{});
      v.u = uint64_t(v.i);
      break;
    case GgufType::UINT16:
      v.u = load(uint16_t{});
      v.i = int64_t(v.u);
      break;
    case GgufType::INT16:
      v.i = load(int16_t{});
      v.u = uint64_t(v.i);
      break;
    case GgufType::UINT32:
      v.u = load(uint32_t{});
      v.i = int64_t(v.u);
      break;
    case GgufType::INT32:
      v.i = load(int32_t{});
      v.u = uint64_t(v.i);
      break;
    case GgufType::UINT64:
      v.u = load(uint64_t{});
      v.i = int64_t(v.u);
      break;
    case GgufType::INT64:
      v.i = load(int64_t{});
      v.u = uint64_t(v.i);
      break;
    case GgufType::BOOL:
      v.i = load(uint8_t{}) != 0;
      v.u = uint64_t(v.i);
      break;
    case GgufType::FLOAT32:
      v.f = load(float{});
      break;
    case GgufType::FLOAT64:
      v.f = load(double{});
      break;
    default:
      break;
  }
  if (is_integer(t)) v.f = double(v.i);
}

// Sequential bounds-checked reader over the mapping.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* base, size_t size) : path_(path), base_(base), size_(size) {}

  size_t pos() const { return pos_; }
  const uint8_t* here() const { return base_ + pos_; }

  void need(uint64_t n, std::string_view what) const {
    if (n > size_ - pos_) {
      fail("{}: truncated file: {} needs {} bytes at offset {}, but the file has {} bytes", path_, what, n,
           pos_, size_);
    }
  }
  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T x;
    std::memcpy(&x, base_ + pos_, sizeof x);
    pos_ += sizeof x;
    return x;
  }
  std::string_view read_string(std::string_view what) {
    const uint64_t len = read<uint64_t>(what);
    if (len > kMaxStringLen) fail("{}: {} has an implausible string length {}", path_, what, len);
    need(len, what);
    std::string_view s(reinterpret_cast<const char*>(base_ + pos_), len);
    pos_ += len;
    return s;
  }
  void skip(uint64_t n, std::string_view what) {
    need(n, what);
    pos_ += n;
  }

 private:
  const std::string& path_;
  const uint8_t* base_;
  size_t size_;
  size_t pos_ = 0;
};

std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) out += (c >= 32 && c < 127) ? c : '?';
  return out;
}

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
      return "uint8";
    case GgufType::INT8:
      return "int8";
    case GgufType::UINT16:
      return "uint16";
    case GgufType::INT16:
      return "int16";
    case GgufType::UINT32:
      return "uint32";
    case GgufType::INT32:
      return "int32";
    case GgufType::FLOAT32:
      return "float32";
    case GgufType::BOOL:
      return "bool";
    case GgufType::STRING:
      return "string";
    case GgufType::ARRAY:
      return "array";
    case GgufType::UINT64:
      return "uint64";
    case GgufType::INT64:
      return "int64";
    case GgufType::FLOAT64:
      return "float64";
  }
  return "unknown";
}

int64_t GgufTensor::nelements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f->fd_ < 0) fail_as(ErrorKind::Io, "{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (fstat(f->fd_, &st) != 0) fail_as(ErrorKind::Io, "{}: cannot stat: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail_as(ErrorKind::Io, "{}: not a regular file", path);
  if (st.st_size < 24)
    fail("{}: not a GGUF file: only {} bytes, smaller than a GGUF header", path, st.st_size);
  f->size_ = static_cast<size_t>(st.st_size);
  void* m = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, f->fd_, 0);
  if (m == MAP_FAILED) fail_as(ErrorKind::Io, "{}: cannot map: {}", path, std::strerror(errno));
  f->base_ = static_cast<const uint8_t*>(m);
  f->parse();
  return f;
}

GgufFile::~GgufFile() {
  if (base_) munmap(const_cast<uint8_t*>(base_), size_);
  if (fd_ >= 0) ::close(fd_);
}

void GgufFile::parse() {
  Cursor c(path_, base_, size_);
  const uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kMagic) {
    fail("{}: not a GGUF file: bad magic '{}' (expected 'GGUF')", path_,
         printable(std::string_view(reinterpret_cast<const char*>(base_), 4)));
  }
  version_ = c.read<uint32_t>("version");
  if (version_ < 2 || version_ > 3) {
    fail("{}: unsupported GGUF version {} (this reader handles versions 2 and 3)", path_, version_);
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Each key/value needs at least 12 bytes and each tensor record at least 28: larger counts cannot fit the
  // file.
  if (n_kv > size_ / 12)
    fail("{}: corrupt header: metadata count {} cannot fit in {} bytes", path_, n_kv, size_);
  if (n_tensors > size_ / 28) {
    fail("{}: corrupt header: tensor count {} cannot fit in {} bytes", path_, n_tensors, size_);
  }

  kv_.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string key(c.read_string(fmt::format("metadata key #{}", k)));
    const std::string what = fmt::format("metadata '{}'", key);
    GgufValue v;
    const uint32_t type = c.read<uint32_t>(what);
    if (type > uint32_t(GgufType::FLOAT64)) fail("{}: {} has unknown value type {}", path_, what, type);
    v.type = GgufType(type);
    if (v.type == GgufType::STRING) {
      v.str = c.read_string(what);
    } else if (v.type == GgufType::ARRAY) {
      const uint32_t et = c.read<uint32_t>(what);
      if (et > uint32_t(GgufType::FLOAT64) || GgufType(et) == GgufType::ARRAY) {
        fail("{}: {} is an array of unsupported element type {}", path_, what, et);
      }
      v.elem_type = GgufType(et);
      v.count = c.read<uint64_t>(what);
      if (v.elem_type == GgufType::STRING) {
        if (v.count > (size_ - c.pos()) / 8)
          fail("{}: truncated file: {} claims {} strings", path_, what, v.count);
        v.strings.reserve(v.count);
        for (uint64_t i = 0; i < v.count; ++i) v.strings.push_back(c.read_string(what));
      } else {
        const size_t es = gguf_scalar_size(v.elem_type);
        if (v.count > (size_ - c.pos()) / es) {
          fail("{}: truncated file: {} claims {} elements of {}", path_, what, v.count,
               gguf_type_name(v.elem_type));
        }
        v.array_data = c.here();
        c.skip(v.count * es, what);
      }
    } else {
      const size_t n = gguf_scalar_size(v.type);
      c.need(n, what);
      decode_scalar(v.type, c.here(), v);
      c.skip(n, what);
    }
    if (kv_index_.count(key)) fail("{}: metadata key '{}' appears twice", path_, key);
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(key, std::move(v));
  }

  if (const GgufValue* a = find("general.alignment")) {
    if (!is_integer(a->type) || a->i <= 0 || (a->i & (a->i - 1)) != 0 || a->i > (1 << 20)) {
      fail("{}: metadata 'general.alignment' must be a power of two, got {}", path_, a->i);
    }
    alignment_ = size_t(a->i);
  }

  tensors_.reserve(n_tensors);
  for (uint64_t t = 0; t < n_tensors; ++t) {
    GgufTensor ti;
    ti.name = std::string(c.read_string(fmt::format("tensor #{} name", t)));
    const std::string what = fmt::format("tensor '{}'", ti.name);
    const uint32_t n_dims = c.read<uint32_t>(what);
    if (n_dims == 0 || n_dims > kMaxDims)
      fail("{}: {} has {} dimensions (1 to {} allowed)", path_, what, n_dims, kMaxDims);
    int64_t n_el = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = c.read<uint64_t>(what);
      if (ne == 0 || ne > uint64_t(std::numeric_limits<int64_t>::max() / n_el)) {
        fail("{}: {} has invalid dimension {} = {}", path_, what, d, ne);
      }
      n_el *= int64_t(ne);
      ti.ne.push_back(int64_t(ne));
    }
    const uint32_t type_id = c.read<uint32_t>(what);
    const TypeTraits* tr = type_traits(type_id);
    if (!tr) fail("{}: {} has unknown tensor type id {}", path_, what, type_id);
    ti.type = GgmlType(type_id);
    if (ti.ne[0] % tr->block_size != 0) {
      fail("{}: {} has row length {} that is not a multiple of the {} block size {}", path_, what, ti.ne[0],
           tr->name, tr->block_size);
    }
    ti.offset = c.read<uint64_t>(what);
    if (ti.offset % alignment_ != 0) {
      fail("{}: {} data offset {} is not aligned to {}", path_, what, ti.offset, alignment_);
    }
    const uint64_t blocks = uint64_t(n_el / tr->block_size);
    if (blocks > std::numeric_limits<uint64_t>::max() / tr->type_size)
      fail("{}: {} is too large", path_, what);
    ti.nbytes = blocks * tr->type_size;
    if (tensor_index_.count(ti.name)) fail("{}: tensor '{}' appears twice", path_, ti.name);
    tensor_index_.emplace(ti.name, tensors_.size());
    tensors_.push_back(std::move(ti));
  }

  // The data section starts at the next multiple of the alignment after the header.
  const uint64_t data_start = (uint64_t(c.pos()) + alignment_ - 1) / alignment_ * alignment_;
  for (GgufTensor& ti : tensors_) {
    if (data_start > size_ || ti.offset > size_ - data_start || ti.nbytes > size_ - data_start - ti.offset) {
      fail("{}: tensor '{}' lies outside the file: bytes [{}, {}) of a {}-byte file (truncated or corrupt)",
           path_, ti.name, data_start + ti.offset, data_start + ti.offset + ti.nbytes, size_);
    }
    ti.data = base_ + data_start + ti.offset;
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(std::string(key));
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const GgufTensor* GgufFile::tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void GgufFile::fail_key(std::string_view key, std::string_view why) const {
  fail("{}: metadata '{}' {}", path_, key, why);
}

std::string GgufFile::get_string(std::string_view key) const {
  auto s = get_string_opt(key);
  if (!s) fail_key(key, "is missing");
  return *s;
}

std::optional<std::string> GgufFile::get_string_opt(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::STRING)
    fail_key(key, fmt::format("should be a string, is {}", gguf_type_name(v->type)));
  return std::string(v->str);
}

int64_t GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) fail_key(key, "is missing");
  return get_int_or(key, 0);
}

int64_t GgufFile::get_int_or(std::string_view key, int64_t fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  if (!is_integer(v->type))
    fail_key(key, fmt::format("should be an integer, is {}", gguf_type_name(v->type)));
  return v->i;
}

double GgufFile::get_float_or(std::string_view key, double fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  if (v->type != GgufType::FLOAT32 && v->type != GgufType::FLOAT64 && !is_integer(v->type)) {
    fail_key(key, fmt::format("should be a number, is {}", gguf_type_name(v->type)));
  }
  return v->f;
}

bool GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  if (!is_integer(v->type)) fail_key(key, fmt::format("should be a bool, is {}", gguf_type_name(v->type)));
  return v->i != 0;
}

std::vector<std::string_view> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) fail_key(key, "is missing");
  if (v->type != GgufType::ARRAY || v->elem_type != GgufType::STRING)
    fail_key(key, "should be an array of strings");
  return v->strings;
}

std::vector<float> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) fail_key(key, "is missing");
  if (v->type != GgufType::ARRAY ||
      (v->elem_type != GgufType::FLOAT32 && v->elem_type != GgufType::FLOAT64)) {
    fail_key(key, "should be an array of floats");
  }
  std::vector<float> out(v->count);
  const size_t es = gguf_scalar_size(v->elem_type);
  for (uint64_t i = 0; i < v->count; ++i) {
    GgufValue e;
    decode_scalar(v->elem_type, v->array_data + i * es, e);
    out[i] = float(e.f);
  }
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) fail_key(key, "is missing");
  if (v->type != GgufType::ARRAY || !is_integer(v->elem_type))
    fail_key(key, "should be an array of integers");
  std::vector<int64_t> out(v->count);
  const size_t es = gguf_scalar_size(v->elem_type);
  for (uint64_t i = 0; i < v->count; ++i) {
    GgufValue e;
    decode_scalar(v->elem_type, v->array_data + i * es, e);
    out[i] = e.i;
  }
  return out;
}

}  // namespace tilellm
