// The C API's error reporting: the calling thread's last-error message, the status names, and how engine
// errors map to status codes.
#include <cstring>

#include "api/api_internal.h"

namespace tilellm::api {
namespace {

thread_local std::string t_last_error;

}  // namespace

void set_error(const char* fn, const char* message) noexcept {
  try {
    t_last_error.assign(fn).append(": ").append(message);
  } catch (...) {
    t_last_error.clear();  // keeps its storage, so this cannot throw
  }
}

tilellm_status status_of(const Error& e, tilellm_status general) noexcept {
  switch (e.kind()) {
    case ErrorKind::Io:
      return TILELLM_ERR_IO;
    case ErrorKind::ContextFull:
      return TILELLM_ERR_CONTEXT_FULL;
    case ErrorKind::OutOfMemory:
      return TILELLM_ERR_OUT_OF_MEMORY;
    case ErrorKind::Mismatch:
      return TILELLM_ERR_STATE_MISMATCH;
    case ErrorKind::Corrupt:
      return TILELLM_ERR_STATE_CORRUPT;
    case ErrorKind::General:
      break;
  }
  return general;
}

void put_text(const std::string& text, char* buf, size_t capacity, size_t* n_out) {
  *n_out = text.size();
  if (capacity < text.size() + 1)
    raise(TILELLM_ERR_BUFFER_TOO_SMALL, "the text takes {} bytes and a NUL; the buffer holds {}", text.size(),
          capacity);
  need(buf, "buf");
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
}

}  // namespace tilellm::api

extern "C" {

const char* tilellm_last_error(void) {
  return tilellm::api::t_last_error.c_str();
}

const char* tilellm_status_name(tilellm_status status) {
  switch (status) {
    case TILELLM_OK:
      return "TILELLM_OK";
    case TILELLM_ERR_INVALID_ARGUMENT:
      return "TILELLM_ERR_INVALID_ARGUMENT";
    case TILELLM_ERR_IO:
      return "TILELLM_ERR_IO";
    case TILELLM_ERR_MODEL:
      return "TILELLM_ERR_MODEL";
    case TILELLM_ERR_BACKEND:
      return "TILELLM_ERR_BACKEND";
    case TILELLM_ERR_CONTEXT_FULL:
      return "TILELLM_ERR_CONTEXT_FULL";
    case TILELLM_ERR_OUT_OF_MEMORY:
      return "TILELLM_ERR_OUT_OF_MEMORY";
    case TILELLM_ERR_STATE_MISMATCH:
      return "TILELLM_ERR_STATE_MISMATCH";
    case TILELLM_ERR_STATE_CORRUPT:
      return "TILELLM_ERR_STATE_CORRUPT";
    case TILELLM_ERR_BUFFER_TOO_SMALL:
      return "TILELLM_ERR_BUFFER_TOO_SMALL";
    case TILELLM_ERR_CANCELLED:
      return "TILELLM_ERR_CANCELLED";
    case TILELLM_ERR_INTERNAL:
      return "TILELLM_ERR_INTERNAL";
  }
  return "unknown status";
}

}  // extern "C"
