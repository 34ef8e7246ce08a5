// What the C API's files share (include/tilellm/tilellm.h is the contract): the opaque objects behind the
// C handles, and the guard every entry point runs its body in, which turns each C++ exception into a status
// code and the calling thread's last-error message, so that nothing C++ crosses the interface.
#pragma once

#include <tilellm/tilellm.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "base/error.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

struct tilellm_model {
  std::shared_ptr<const tilellm::Model> model;
  std::string path;
  // Every token's vocabulary text with a terminating NUL (tilellm_token_text), made on first use.
  std::once_flag texts_once;
  std::vector<std::string> texts;
};

struct tilellm_session {
  std::shared_ptr<const tilellm::Model> model;  // declared first: outlives the session that refers to it
  std::unique_ptr<tilellm::Session> session;
  std::string backend;
  std::atomic<bool> cancel{false};  // tilellm_session_cancel; read by tilellm_generate
};

struct tilellm_sampler {
  std::unique_ptr<tilellm::Sampler> sampler;
  uint64_t seed = 0;
};

namespace tilellm::api {

// An error the API itself raises, with its status (a null pointer, a bad option, a buffer too small).
struct ApiError : std::exception {
  ApiError(tilellm_status s, std::string m) : status(s), message(std::move(m)) {}
  const char* what() const noexcept override { return message.c_str(); }
  tilellm_status status;
  std::string message;
};

template <typename... Args>
[[noreturn]] void raise(tilellm_status s, fmt::format_string<Args...> f, Args&&... args) {
  throw ApiError(s, fmt::format(f, std::forward<Args>(args)...));
}

// Throws TILELLM_ERR_INVALID_ARGUMENT "what is NULL" when p is null (the guard adds the function's name).
inline void need(const void* p, const char* what) {
  if (!p) raise(TILELLM_ERR_INVALID_ARGUMENT, "{} is NULL", what);
}

// Sets the calling thread's last-error message (never throws: a message that cannot be stored becomes a
// fixed one).
void set_error(const char* fn, const char* message) noexcept;

// The status of an engine error: its kind where it has one, else `general` (what the entry point reports
// for an error of its own domain: TILELLM_ERR_MODEL for a model load, ...).
tilellm_status status_of(const Error& e, tilellm_status general) noexcept;

// Runs body(); returns TILELLM_OK, or the status of what it threw, with the message stored for
// tilellm_last_error (prefixed with the entry point's name).
template <typename F>
tilellm_status guard(const char* fn, tilellm_status general, F&& body) noexcept {
  try {
    body();
    return TILELLM_OK;
  } catch (const ApiError& e) {
    set_error(fn, e.what());
    return e.status;
  } catch (const Error& e) {
    set_error(fn, e.what());
    return status_of(e, general);
  } catch (const std::bad_alloc&) {
    set_error(fn, "out of memory");
    return TILELLM_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_error(fn, (std::string("internal error: ") + e.what()).c_str());
    return TILELLM_ERR_INTERNAL;
  } catch (...) {
    set_error(fn, "internal error: an unknown exception");
    return TILELLM_ERR_INTERNAL;
  }
}

// Copies n bytes of text and a NUL into (buf, capacity), or says how much is needed (the header's output
// buffer convention). n_out may not be null.
void put_text(const std::string& text, char* buf, size_t capacity, size_t* n_out);

// A backend's devices as queried once for the process (api_library.cpp; none when it cannot run here).
const std::vector<DeviceInfo>& backend_devices(const BackendEntry& e);

}  // namespace tilellm::api
