// The C API's sampler chain and generation loop (runtime/generate.h: the loop `tilellm run` runs).
#include <random>

#include "api/api_internal.h"
#include "runtime/generate.h"

using namespace tilellm;
using namespace tilellm::api;

extern "C" {

tilellm_sampler_params tilellm_sampler_default_params(void) {
  const SamplerParams d;
  tilellm_sampler_params p;
  p.temperature = d.temperature;
  p.top_k = d.top_k;
  p.top_p = d.top_p;
  p.min_p = d.min_p;
  p.repeat_penalty = d.repeat_penalty;
  p.repeat_last_n = d.repeat_last_n;
  p.seed = TILELLM_SEED_RANDOM;
  return p;
}

tilellm_status tilellm_sampler_create(const tilellm_model* model, const tilellm_sampler_params* params,
                                      tilellm_sampler** out) {
  return guard("tilellm_sampler_create", TILELLM_ERR_INVALID_ARGUMENT, [&] {
    need(out, "out");
    *out = nullptr;
    need(model, "model");
    const tilellm_sampler_params p = params ? *params : tilellm_sampler_default_params();
    SamplerParams sp;
    sp.temperature = p.temperature;
    sp.top_k = p.top_k;
    sp.top_p = p.top_p;
    sp.min_p = p.min_p;
    sp.repeat_penalty = p.repeat_penalty;
    sp.repeat_last_n = p.repeat_last_n;
    sp.seed = p.seed;
    if (p.seed == TILELLM_SEED_RANDOM) {
      std::random_device rd;
      sp.seed = (uint64_t(rd()) << 32 | rd()) & ((uint64_t(1) << 53) - 1);
    }
    auto s = std::make_unique<tilellm_sampler>();
    s->sampler = std::make_unique<Sampler>(sp, int32_t(model->model->config().n_vocab));  // checks sp
    s->seed = sp.seed;
    *out = s.release();
  });
}

void tilellm_sampler_free(tilellm_sampler* sampler) {
  delete sampler;
}

tilellm_status tilellm_sampler_sample(tilellm_sampler* sampler, const tilellm_session* session,
                                      int32_t* token) {
  return guard("tilellm_sampler_sample", TILELLM_ERR_INVALID_ARGUMENT, [&] {
    need(sampler, "sampler");
    need(session, "session");
    need(token, "token");
    const Session& s = *session->session;
    if (!s.has_logits())
      raise(TILELLM_ERR_INVALID_ARGUMENT, "the session holds no logits: evaluate tokens first");
    if (s.model().config().n_vocab != sampler->sampler->n_vocab())
      raise(TILELLM_ERR_INVALID_ARGUMENT, "the sampler was made for a vocabulary of {}, the session's has {}",
            sampler->sampler->n_vocab(), s.model().config().n_vocab);
    *token = sampler->sampler->sample(s.logits());
  });
}

tilellm_status tilellm_sampler_sample_logits(tilellm_sampler* sampler, const float* logits, int32_t* token) {
  return guard("tilellm_sampler_sample_logits", TILELLM_ERR_INVALID_ARGUMENT, [&] {
    need(sampler, "sampler");
    need(logits, "logits");
    need(token, "token");
    *token = sampler->sampler->sample(logits);
  });
}

tilellm_status tilellm_sampler_accept(tilellm_sampler* sampler, int32_t token) {
  return guard("tilellm_sampler_accept", TILELLM_ERR_INVALID_ARGUMENT, [&] {
    need(sampler, "sampler");
    sampler->sampler->accept(token);
  });
}

void tilellm_sampler_reset(tilellm_sampler* sampler) {
  if (sampler) sampler->sampler->reset();
}

uint64_t tilellm_sampler_seed(const tilellm_sampler* sampler) {
  return sampler ? sampler->seed : 0;
}

tilellm_generate_params tilellm_generate_default_params(void) {
  tilellm_generate_params p;
  p.n_predict = 128;
  p.ignore_eos = false;
  p.on_token = nullptr;
  p.user_data = nullptr;
  return p;
}

tilellm_status tilellm_generate(tilellm_session* session, tilellm_sampler* sampler, const int32_t* prompt,
                                int64_t n_prompt, const tilellm_generate_params* params,
                                tilellm_generate_result* result) {
  const tilellm_status st = guard("tilellm_generate", TILELLM_ERR_BACKEND, [&] {
    need(session, "session");
    need(sampler, "sampler");
    Session& s = *session->session;
    const tilellm_generate_params p = params ? *params : tilellm_generate_default_params();
    if (p.n_predict < -1)
      raise(TILELLM_ERR_INVALID_ARGUMENT, "n_predict must be -1 or more, got {}", p.n_predict);
    if (n_prompt < 0) raise(TILELLM_ERR_INVALID_ARGUMENT, "n_prompt is {}", n_prompt);
    if (n_prompt > 0) need(prompt, "prompt");
    const int64_t V = s.model().config().n_vocab;
    if (sampler->sampler->n_vocab() != V)
      raise(TILELLM_ERR_INVALID_ARGUMENT, "the sampler was made for a vocabulary of {}, the session's has {}",
            sampler->sampler->n_vocab(), V);
    for (int64_t i = 0; i < n_prompt; ++i) {
      if (prompt[i] < 0 || prompt[i] >= V)
        raise(TILELLM_ERR_INVALID_ARGUMENT, "prompt token {} (id {}) is outside the vocabulary of {}", i,
              prompt[i], V);
    }
    if (n_prompt == 0 && !s.has_logits())
      raise(TILELLM_ERR_INVALID_ARGUMENT,
            "the prompt is empty and the session holds no logits to go on from");
    const Tokenizer& tok = s.model().tokenizer();
    GenerateOptions go;
    go.n_predict = p.n_predict;
    go.stop_at_eog = !p.ignore_eos;
    go.cancel = &session->cancel;
    const GenerateStats gs =
        generate(s, *sampler->sampler, std::vector<int32_t>(prompt, prompt + n_prompt), go, [&](int32_t id) {
          if (!p.on_token) return true;
          const std::string piece = tok.token_to_piece(id);
          return p.on_token(id, piece.data(), piece.size(), p.user_data);
        });
    if (result) {
      result->n_prompt = gs.n_prompt;
      result->n_generated = gs.n_gen;
      result->prompt_ms = gs.prompt_ms;
      result->generate_ms = gs.gen_ms;
      result->stop = gs.cancelled     ? TILELLM_STOP_CANCELLED
                     : gs.stopped     ? TILELLM_STOP_CALLBACK
                     : gs.hit_eog     ? TILELLM_STOP_EOG
                     : gs.hit_context ? TILELLM_STOP_CONTEXT_FULL
                                      : TILELLM_STOP_LENGTH;
    }
  });
  if (session) session->cancel.store(false, std::memory_order_relaxed);  // the request is consumed
  return st;
}

}  // extern "C"
