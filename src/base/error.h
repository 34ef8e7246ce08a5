// Error type for every failure a user can cause (bad file, bad argument, prompt too long).
// The message names the cause: file, tensor or key, and the reason. The CLI prints it and exits non-zero.
// An error may also say what kind of failure it is (ErrorKind), where a caller acts on the difference:
// the C API turns kinds into its status codes (include/tilellm/tilellm.h); most errors are General.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace tilellm {

enum class ErrorKind {
  General,      // what the operation reports by default (a broken model file, a bad option, ...)
  Io,           // a file that cannot be opened, read or written
  ContextFull,  // tokens that do not fit in the session's context
  OutOfMemory,  // a size this machine cannot hold, refused before allocating
  Mismatch,     // a saved session made for another model, context size or cache type
  Corrupt,      // a saved session that is truncated or damaged
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, ErrorKind kind = ErrorKind::General)
      : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

// fail() with a kind.
template <typename... Args>
[[noreturn]] void fail_as(ErrorKind kind, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...), kind);
}

}  // namespace tilellm
