// The C API's sessions: typed options checked before anything is made, eval and logits, truncate,
// save/restore, and the cancel request.
#include <algorithm>
#include <map>

#include "api/api_internal.h"
#include "backends/registry.h"

using namespace tilellm;
using namespace tilellm::api;

namespace {

Session& session_of(tilellm_session* s) {
  need(s, "session");
  return *s->session;
}

// The session options of p, every field checked (TILELLM_ERR_INVALID_ARGUMENT naming it), the backend
// found (TILELLM_ERR_BACKEND when this build or machine lacks it) and its own options parsed.
SessionOptions session_options(const tilellm_session_params& p) {
  constexpr tilellm_status bad = TILELLM_ERR_INVALID_ARGUMENT;
  SessionOptions o;
  if (p.n_threads < 0)
    raise(bad, "n_threads must be 0 (the CPUs the process may use) or more, got {}", p.n_threads);
  if (p.n_ctx < 0) raise(bad, "n_ctx must be 0 (the model's) or more, got {}", p.n_ctx);
  if (p.n_batch < 0) raise(bad, "n_batch must be 0 (the backend's own) or more, got {}", p.n_batch);
  if (p.device < -1)
    raise(bad, "device must be -1 (the backend's first device not emulated on the CPU) or 0 or more, got {}",
          p.device);
  if (p.kv_type != TILELLM_KV_F16 && p.kv_type != TILELLM_KV_F32)
    raise(bad, "kv_type {} is not a tilellm_kv_type (TILELLM_KV_F16, TILELLM_KV_F32)", int(p.kv_type));
  if (int(p.weights) < TILELLM_WEIGHTS_NATIVE || int(p.weights) > TILELLM_WEIGHTS_F32)
    raise(bad, "weights {} is not a tilellm_weights_mode", int(p.weights));
  if (p.activations != TILELLM_ACTIVATIONS_Q8 && p.activations != TILELLM_ACTIVATIONS_F32)
    raise(bad, "activations {} is not a tilellm_activations", int(p.activations));
  if (int(p.prefill) < TILELLM_PREFILL_DEVICE || int(p.prefill) > TILELLM_PREFILL_AUTO)
    raise(bad, "prefill {} is not a tilellm_prefill", int(p.prefill));
  if (p.n_backend_options > 0 && !p.backend_options)
    raise(bad, "n_backend_options is {} but backend_options is NULL", p.n_backend_options);
  o.backend = p.backend && *p.backend ? p.backend : "cpu";
  o.device = p.device;
  o.n_threads = p.n_threads;
  o.n_ctx = p.n_ctx;
  o.n_batch = p.n_batch;  // 0: the backend's own, below
  o.kv_type = p.kv_type == TILELLM_KV_F32 ? GgmlType::F32 : GgmlType::F16;
  static constexpr WeightsMode kModes[] = {WeightsMode::Native, WeightsMode::Int4B64, WeightsMode::Int8B0,
                                           WeightsMode::Int4B0, WeightsMode::F16,     WeightsMode::F32};
  o.weights = kModes[p.weights];
  o.activations = p.activations == TILELLM_ACTIVATIONS_F32 ? ActivationMode::F32 : ActivationMode::Quantized;
  o.prefill = p.prefill == TILELLM_PREFILL_CPU    ? PrefillMode::Cpu
              : p.prefill == TILELLM_PREFILL_AUTO ? PrefillMode::Auto
                                                  : PrefillMode::Gpu;
  o.device_profile = p.device_profile && *p.device_profile ? p.device_profile : "none";
  o.logits_all = p.logits_all;

  const BackendEntry* e = find_backend(o.backend);
  if (!e) {
    try {
      require_backend(o.backend);
    } catch (const Error& err) {
      // A name no build of TileLLM has is a bad argument; one this build lacks is a missing backend.
      const bool known = std::string_view(err.what()).rfind("unknown backend", 0) != 0;
      throw ApiError(known ? TILELLM_ERR_BACKEND : bad, err.what());
    }
  }
  // As the CLI without --device (an unavailable backend lists none: the session says why it cannot run).
  if (o.device < 0) o.device = default_device(backend_devices(*e));
  // As the CLI without -b: a GPU backend's prompt GEMM fills the device only with many tokens a pass.
  if (o.n_batch == 0) o.n_batch = e->prompt_batch;
  std::map<std::string, std::string> given;
  for (size_t i = 0; i < p.n_backend_options; ++i) {
    const char* kv = p.backend_options[i];
    if (!kv) raise(bad, "backend_options[{}] is NULL", i);
    const std::string_view s(kv);
    const size_t eq = s.find('=');
    if (eq == std::string_view::npos || eq == 0)
      raise(bad, "backend option '{}' is not name=value (e.g. isa=avx2)", s);
    std::string name(s.substr(0, eq));
    if (name.rfind("--", 0) != 0) name = "--" + name;
    given[name] = std::string(s.substr(eq + 1));
  }
  try {
    o.backend_options = make_backend_options(*e, given);
  } catch (const Error& err) {
    throw ApiError(bad, err.what());
  }
  return o;
}

}  // namespace

extern "C" {

tilellm_session_params tilellm_session_default_params(void) {
  tilellm_session_params p;
  p.backend = nullptr;
  p.device = -1;
  p.n_threads = 0;
  p.n_ctx = 0;
  p.n_batch = 0;
  p.kv_type = TILELLM_KV_F16;
  p.weights = TILELLM_WEIGHTS_NATIVE;
  p.activations = TILELLM_ACTIVATIONS_Q8;
  p.prefill = TILELLM_PREFILL_DEVICE;
  p.device_profile = nullptr;
  p.backend_options = nullptr;
  p.n_backend_options = 0;
  p.logits_all = false;
  return p;
}

tilellm_status tilellm_session_create(const tilellm_model* model, const tilellm_session_params* params,
                                      tilellm_session** out) {
  return guard("tilellm_session_create", TILELLM_ERR_BACKEND, [&] {
    need(out, "out");
    *out = nullptr;
    need(model, "model");
    const SessionOptions o = session_options(params ? *params : tilellm_session_default_params());
    auto s = std::make_unique<tilellm_session>();
    s->model = model->model;
    s->session = std::make_unique<Session>(*s->model, o);
    s->backend = std::string(s->session->backend_name());
    *out = s.release();
  });
}

void tilellm_session_free(tilellm_session* session) {
  delete session;
}

int64_t tilellm_session_n_ctx(const tilellm_session* session) {
  return session ? session->session->n_ctx() : 0;
}

int64_t tilellm_session_n_batch(const tilellm_session* session) {
  return session ? session->session->n_batch() : 0;
}

int64_t tilellm_session_n_past(const tilellm_session* session) {
  return session ? session->session->n_past() : 0;
}

const int32_t* tilellm_session_tokens(const tilellm_session* session, int64_t* n_tokens) {
  if (n_tokens) *n_tokens = session ? int64_t(session->session->tokens().size()) : 0;
  return session ? session->session->tokens().data() : nullptr;
}

const char* tilellm_session_backend(const tilellm_session* session) {
  return session ? session->backend.c_str() : "";
}

tilellm_status tilellm_session_eval(tilellm_session* session, const int32_t* tokens, int64_t n_tokens) {
  return guard("tilellm_session_eval", TILELLM_ERR_BACKEND, [&] {
    Session& s = session_of(session);
    if (n_tokens < 0) raise(TILELLM_ERR_INVALID_ARGUMENT, "n_tokens is {}", n_tokens);
    if (n_tokens > 0) need(tokens, "tokens");
    const int64_t V = s.model().config().n_vocab;
    for (int64_t i = 0; i < n_tokens; ++i) {
      if (tokens[i] < 0 || tokens[i] >= V)
        raise(TILELLM_ERR_INVALID_ARGUMENT, "token {} (id {}) is outside the vocabulary of {}", i, tokens[i],
              V);
    }
    s.eval(tokens, n_tokens);
  });
}

const float* tilellm_session_logits(const tilellm_session* session) {
  if (!session || !session->session->has_logits()) return nullptr;
  return session->session->logits();
}

const float* tilellm_session_logits_at(const tilellm_session* session, int64_t i) {
  if (!session || !session->session->has_logits()) return nullptr;
  try {
    return session->session->logits_at(i);
  } catch (const Error& e) {
    set_error("tilellm_session_logits_at", e.what());
    return nullptr;
  }
}

tilellm_status tilellm_session_truncate(tilellm_session* session, int64_t n_keep) {
  return guard("tilellm_session_truncate", TILELLM_ERR_INTERNAL, [&] {
    Session& s = session_of(session);
    if (n_keep < 0) raise(TILELLM_ERR_INVALID_ARGUMENT, "n_keep must be 0 or more, got {}", n_keep);
    s.truncate(n_keep);
  });
}

tilellm_status tilellm_session_save(tilellm_session* session, const char* path) {
  return guard("tilellm_session_save", TILELLM_ERR_BACKEND, [&] {
    Session& s = session_of(session);
    need(path, "path");
    s.save_state(path);
  });
}

tilellm_status tilellm_session_load(tilellm_session* session, const char* path) {
  return guard("tilellm_session_load", TILELLM_ERR_BACKEND, [&] {
    Session& s = session_of(session);
    need(path, "path");
    s.load_state(path);
  });
}

void tilellm_session_cancel(tilellm_session* session) {
  if (session) session->cancel.store(true, std::memory_order_relaxed);
}

}  // extern "C"
