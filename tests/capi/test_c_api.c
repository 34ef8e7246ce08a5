/*
 * The C API (include/tilellm/tilellm.h) from C: every entry point's happy path on the default model, and
 * every error path with its status code and its message (a bad path, a broken file, bad options, a context
 * overflow, buffers too small, broken or foreign session files), the token callback and the cancel request,
 * and save/restore giving the uninterrupted run's tokens.
 *
 *   test_c_api MODEL.gguf            (SmolLM2-135M-Instruct Q4_1; compiled as C99)
 */
#define _POSIX_C_SOURCE 200809L /* getpid */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tilellm/tilellm.h>
#include <unistd.h>

static int g_failures = 0;
static int g_checks = 0;

static void check(bool ok, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s ", ok ? "ok  " : "FAIL");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  ++g_checks;
  if (!ok) ++g_failures;
}

/* A call failed with `want` and a message holding `needle`. */
static void expect_error(tilellm_status got, tilellm_status want, const char* needle, const char* what) {
  const char* msg = tilellm_last_error();
  check(got == want && strstr(msg, needle) != NULL && strchr(msg, '\n') == NULL, "%s: %s, '%s'", what,
        tilellm_status_name(got), msg);
}

static char g_tmp[256];

static const char* tmp_file(const char* name) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", g_tmp, name);
  return path;
}

static void write_file(const char* path, const void* data, size_t n) {
  FILE* f = fopen(path, "wb");
  if (f) {
    fwrite(data, 1, n, f);
    fclose(f);
  }
}

static size_t read_file(const char* path, unsigned char** data) {
  FILE* f = fopen(path, "rb");
  size_t n = 0;
  *data = NULL;
  if (!f) return 0;
  fseek(f, 0, SEEK_END);
  n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  *data = malloc(n ? n : 1);
  if (fread(*data, 1, n, f) != n) n = 0;
  fclose(f);
  return n;
}

/* ---- library, backends ---- */
static void test_library(void) {
  check(strcmp(tilellm_version(), "0.1.0") == 0, "tilellm_version: %s", tilellm_version());
  check(strstr(tilellm_build_info(), "commit") != NULL, "tilellm_build_info: %s", tilellm_build_info());
  check(strcmp(tilellm_status_name(TILELLM_ERR_CONTEXT_FULL), "TILELLM_ERR_CONTEXT_FULL") == 0 &&
            strcmp(tilellm_status_name((tilellm_status)99), "unknown status") == 0,
        "tilellm_status_name");
  const int32_t n = tilellm_backend_count();
  tilellm_backend_info b;
  memset(&b, 0, sizeof b);
  tilellm_status st = tilellm_backend_get_info(0, &b);
  check(n >= 1 && st == TILELLM_OK && strcmp(b.name, "cpu") == 0 && b.is_host && b.available &&
            b.n_devices == 1 && b.mnn_type == 0,
        "backend 0 is the cpu host backend, available, one device (%d backends)", n);
  for (int32_t i = 1; i < n; ++i) {
    st = tilellm_backend_get_info(i, &b);
    check(st == TILELLM_OK && !b.is_host && (b.available == (b.unavailable[0] == 0)), "backend %d: %s (%s)",
          i, b.name, b.available ? "available" : b.unavailable);
  }
  expect_error(tilellm_backend_get_info(n, &b), TILELLM_ERR_INVALID_ARGUMENT, "backend index",
               "backend index n");
  expect_error(tilellm_backend_get_info(0, NULL), TILELLM_ERR_INVALID_ARGUMENT, "out is NULL", "NULL out");
  tilellm_device_info d;
  memset(&d, 0, sizeof d);
  st = tilellm_device_get_info("cpu", 0, &d);
  check(st == TILELLM_OK && d.name[0] && strstr(d.summary, "isa") != NULL &&
            strstr(d.details, "hardware threads") != NULL && !d.emulated,
        "cpu device 0: %s (%s)", d.name, d.summary);
  expect_error(tilellm_device_get_info("cpu", 3, &d), TILELLM_ERR_INVALID_ARGUMENT, "no device 3",
               "cpu device 3");
  expect_error(tilellm_device_get_info("metal", 0, &d), TILELLM_ERR_BACKEND, "Linux", "metal's devices");
}

/* ---- models ---- */
static float g_last_fraction = -1.0f;
static int g_reports = 0;
static bool progress(float f, void* user) {
  const float stop_at = *(const float*)user;
  if (f < g_last_fraction) g_failures += 1000; /* never goes back */
  g_last_fraction = f;
  ++g_reports;
  return f < stop_at;
}

static tilellm_model* test_model_load(const char* path) {
  tilellm_model* m = (tilellm_model*)1;
  expect_error(tilellm_model_load(tmp_file("missing.gguf"), NULL, &m), TILELLM_ERR_IO,
               "missing.gguf: cannot open", "a missing file");
  check(m == NULL, "a failed load sets *out to NULL");
  write_file(tmp_file("text.gguf"), "this is not a model file at all, just some text", 48);
  expect_error(tilellm_model_load(tmp_file("text.gguf"), NULL, &m), TILELLM_ERR_MODEL, "bad magic",
               "a file that is not GGUF");
  unsigned char* bytes = NULL;
  const size_t n = read_file(path, &bytes);
  write_file(tmp_file("cut.gguf"), bytes, n > 4096 ? 4096 : n);
  free(bytes);
  expect_error(tilellm_model_load(tmp_file("cut.gguf"), NULL, &m), TILELLM_ERR_MODEL, "cut.gguf",
               "a truncated model file");
  expect_error(tilellm_model_load(NULL, NULL, &m), TILELLM_ERR_INVALID_ARGUMENT, "path is NULL",
               "a NULL path");

  tilellm_model_params mp = tilellm_model_default_params();
  float stop_at = 0.5f;
  mp.progress = progress;
  mp.progress_user_data = &stop_at;
  expect_error(tilellm_model_load(path, &mp, &m), TILELLM_ERR_CANCELLED, "stopped the load",
               "a load the progress callback stops");
  stop_at = 2.0f;
  g_last_fraction = -1.0f;
  g_reports = 0;
  check(tilellm_model_load(path, &mp, &m) == TILELLM_OK && m != NULL, "load %s", path);
  check(g_reports > 2 && g_last_fraction == 1.0f, "progress: %d reports, the last at %.2f", g_reports,
        (double)g_last_fraction);
  return m;
}

static void test_model_info(const tilellm_model* m) {
  tilellm_model_info info;
  memset(&info, 0, sizeof info);
  const tilellm_status st = tilellm_model_get_info(m, &info);
  check(st == TILELLM_OK && strcmp(info.architecture, "llama") == 0 && info.n_vocab == 49152 &&
            info.n_layer == 30 && info.n_embd == 576 && info.n_head == 9 && info.n_head_kv == 3 &&
            info.head_dim == 64 && info.n_ctx_train == 8192 && info.n_params > 100000000,
        "model info: %s '%s', %d layers, vocab %d, %lld params", info.architecture, info.name, info.n_layer,
        info.n_vocab, (long long)info.n_params);
  const int32_t nm = tilellm_model_meta_count(m);
  int found = -1;
  for (int32_t i = 0; i < nm; ++i) {
    if (strcmp(tilellm_model_meta_key(m, i), "general.architecture") == 0) found = i;
  }
  check(nm > 10 && found >= 0 && tilellm_model_meta_key(m, nm) == NULL, "%d metadata keys", nm);
  char buf[64];
  size_t n = 0;
  const char* want[3][2] = {{"general.architecture", "llama"},
                            {"llama.block_count", "30"},
                            {"tokenizer.ggml.tokens", "[49152 items of string]"}};
  for (int i = 0; i < 3; ++i) {
    buf[0] = 0;
    const tilellm_status vs = tilellm_model_meta_value(m, want[i][0], buf, sizeof buf, &n);
    check(vs == TILELLM_OK && strcmp(buf, want[i][1]) == 0 && n == strlen(want[i][1]), "%s = %s", want[i][0],
          buf);
  }
  expect_error(tilellm_model_meta_value(m, "general.architecture", buf, 5, &n), TILELLM_ERR_BUFFER_TOO_SMALL,
               "the buffer holds 5", "a metadata value into 5 bytes");
  check(n == 5, "... says 5 bytes (and a NUL) are needed: %zu", n);
  expect_error(tilellm_model_meta_value(m, "no.such.key", buf, sizeof buf, &n), TILELLM_ERR_INVALID_ARGUMENT,
               "no metadata key 'no.such.key'", "a missing metadata key");
  expect_error(tilellm_model_get_info(NULL, &info), TILELLM_ERR_INVALID_ARGUMENT, "model is NULL",
               "a NULL model");
}

static void test_tokenizer(const tilellm_model* m) {
  const char* text = "Hello world, this is TileLLM.";
  int32_t ids[64];
  size_t n = 0, need = 0;
  expect_error(tilellm_tokenize(m, text, strlen(text), true, false, ids, 2, &need),
               TILELLM_ERR_BUFFER_TOO_SMALL, "the buffer holds 2", "tokens into 2 slots");
  tilellm_status st = tilellm_tokenize(m, text, strlen(text), true, false, ids, 64, &n);
  check(st == TILELLM_OK && n == need && n > 5, "tokenize: %zu tokens (the size asked first: %zu)", n, need);
  char out[256];
  size_t len = 0;
  st = tilellm_detokenize(m, ids, n, false, out, sizeof out, &len);
  check(st == TILELLM_OK && strcmp(out, text) == 0 && len == strlen(text),
        "detokenize gives the text back: '%s'", out);
  expect_error(tilellm_detokenize(m, ids, n, false, out, len, &len), TILELLM_ERR_BUFFER_TOO_SMALL,
               "and a NUL", "detokenize without room for the NUL");
  const int32_t bad = 49152;
  expect_error(tilellm_detokenize(m, &bad, 1, false, out, sizeof out, &len), TILELLM_ERR_INVALID_ARGUMENT,
               "outside the vocabulary", "detokenize an id past the vocabulary");
  /* "Hello" is one token of SmolLM2's vocabulary. */
  st = tilellm_token_to_piece(m, ids[0], false, out, sizeof out, &len);
  check(st == TILELLM_OK && strcmp(out, "Hello") == 0, "token_to_piece(%d) = '%s'", ids[0], out);
  const int32_t eos = tilellm_token_special(m, TILELLM_TOKEN_EOS);
  const int32_t eot = tilellm_token_special(m, TILELLM_TOKEN_EOT);
  check(eos >= 0 && tilellm_token_is_eog(m, eos) && tilellm_token_is_control(m, eos) &&
            !tilellm_token_is_eog(m, ids[0]),
        "eos %d ends generation and is a control token (eot %d)", eos, eot);
  /* SmolLM2's end of sequence is its end of turn, <|im_end|>. */
  check(strcmp(tilellm_token_text(m, eos), "<|im_end|>") == 0 && strcmp(tilellm_token_text(m, -1), "") == 0,
        "token_text(eos) = %s", tilellm_token_text(m, eos));
  st = tilellm_token_to_piece(m, eos, false, out, sizeof out, &len);
  check(st == TILELLM_OK && len == 0, "a control token gives no text");
  st = tilellm_token_to_piece(m, eos, true, out, sizeof out, &len);
  check(st == TILELLM_OK && strcmp(out, "<|im_end|>") == 0, "... unless rendered: %s", out);

  tilellm_chat_message msgs[2] = {{"system", "Be brief."}, {"user", "Hi!"}};
  check(tilellm_chat_apply(m, NULL, msgs, 2, true, out, sizeof out, &len) == TILELLM_OK &&
            strcmp(out,
                   "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
                   "<|im_start|>assistant\n") == 0,
        "chat_apply with the model's template (ChatML)");
  check(tilellm_chat_apply(m, "llama3", msgs + 1, 1, false, out, sizeof out, &len) == TILELLM_OK &&
            strstr(out, "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>") != NULL,
        "chat_apply with a built-in template (llama3)");
  expect_error(tilellm_chat_apply(m, "nope", msgs, 2, true, out, sizeof out, &len),
               TILELLM_ERR_INVALID_ARGUMENT, "'nope' is not a built-in chat format",
               "an unknown chat template");
  tilellm_chat_message broken = {"user", NULL};
  expect_error(tilellm_chat_apply(m, NULL, &broken, 1, true, out, sizeof out, &len),
               TILELLM_ERR_INVALID_ARGUMENT, "NULL role or content", "a message without content");
}

/* ---- sessions ---- */
static tilellm_session_params small_params(int64_t n_ctx) {
  tilellm_session_params p = tilellm_session_default_params();
  p.n_ctx = n_ctx;
  p.n_threads = 2;
  return p;
}

static void test_session_options(const tilellm_model* m) {
  tilellm_session* s = (tilellm_session*)1;
  tilellm_session_params p = small_params(64);
  p.n_batch = -1;
  expect_error(tilellm_session_create(m, &p, &s), TILELLM_ERR_INVALID_ARGUMENT, "n_batch must be 0",
               "n_batch -1");
  check(s == NULL, "a failed create sets *out to NULL");
  /* n_batch 0 (the default): the backend's own, 64 on the CPU; a given one is kept (within the context). */
  p = small_params(128);
  check(p.n_batch == 0, "the default n_batch is the backend's own (0)");
  check(tilellm_session_create(m, &p, &s) == TILELLM_OK && tilellm_session_n_batch(s) == 64,
        "the CPU's own n_batch is 64");
  tilellm_session_free(s);
  p.n_batch = 24;
  check(tilellm_session_create(m, &p, &s) == TILELLM_OK && tilellm_session_n_batch(s) == 24,
        "n_batch 24 kept");
  tilellm_session_free(s);
  s = (tilellm_session*)1;
  p = small_params(64);
  p.n_threads = -2;
  expect_error(tilellm_session_create(m, &p, &s), TILELLM_ERR_INVALID_ARGUMENT, "n_threads", "n_threads -2");
  p = small_params(-5);
  expect_error(tilellm_session_create(m, &p, &s), TILELLM_ERR_INVALID_ARGUMENT, "n_ctx", "n_ctx -5");
  p = small_params(64);
  p.kv_type = (tilellm_kv_type)7;
  expect_error(tilellm_session_create(m, &p, &s), TILELLM_ERR_INVALID_ARGUMENT, "kv_type 7", "kv_type 7");
  p = small_params(64);
  p.weights = (tilellm_weights_mode)42;
  expect_error(tilellm_session_create(m, &p, &s), TILELLM_ERR_INVALID_ARGUMENT, "weights 42", "weights 42");
  p = small_params(64);
  p.backend = "nope";
  expect_error(tilellm_session_create(m, &p, &s), TILELLM_ERR_INVALID_ARGUMENT, "unknown backend 'nope'",
               "an unknown backend");
  p.backend = "metal";
  expect_error(tilellm_session_create(m, &p, &s), TILELLM_ERR_BACKEND, "not in this build",
               "the metal backend");
  p = small_params(64);
  p.device = 1;
  expect_error(tilellm_session_create(m, &p, &s), TILELLM_ERR_BACKEND, "one device", "cpu device 1");
  p.device = -2;
  expect_error(tilellm_session_create(m, &p, &s), TILELLM_ERR_INVALID_ARGUMENT, "device must be -1",
               "device -2");
  /* -1 (the default): the backend's first device not emulated on the CPU; the CPU's is its device 0. */
  p = small_params(64);
  check(p.device == -1, "the default device is -1 (the backend's first one not emulated on the CPU)");
  check(tilellm_session_create(m, &p, &s) == TILELLM_OK, "a session on the default device");
  tilellm_session_free(s);
  const char* bad_isa[] = {"isa=frobnicate"};
  p = small_params(64);
  p.backend_options = bad_isa;
  p.n_backend_options = 1;
  expect_error(tilellm_session_create(m, &p, &s), TILELLM_ERR_INVALID_ARGUMENT, "frobnicate",
               "isa=frobnicate");
  const char* unknown[] = {"cl-cache=off"};
  p.backend_options = unknown;
  expect_error(tilellm_session_create(m, &p, &s), TILELLM_ERR_INVALID_ARGUMENT,
               "--cl-cache is not an option of the cpu backend", "an option of another backend");
  const char* malformed[] = {"isa"};
  p.backend_options = malformed;
  expect_error(tilellm_session_create(m, &p, &s), TILELLM_ERR_INVALID_ARGUMENT, "not name=value",
               "'isa' alone");
  p = small_params(16000000);
  expect_error(tilellm_session_create(m, &p, &s), TILELLM_ERR_OUT_OF_MEMORY, "GiB of host memory",
               "a context larger than memory");
  const char* scalar[] = {"isa=scalar"};
  p = small_params(32);
  p.backend_options = scalar;
  p.n_backend_options = 1;
  check(tilellm_session_create(m, &p, &s) == TILELLM_OK && strcmp(tilellm_session_backend(s), "cpu") == 0,
        "a session with the cpu backend's own option isa=scalar");
  tilellm_session_free(s);
  const char* best[] = {"isa=best"}; /* back to the best this CPU runs, for the rest of the program */
  p.backend_options = best;
  s = NULL;
  check(tilellm_session_create(m, &p, &s) == TILELLM_OK, "isa=best");
  tilellm_session_free(s);
}

static int32_t argmax(const float* v, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

static void test_eval_and_overflow(const tilellm_model* m) {
  tilellm_session_params p = small_params(16);
  tilellm_session* s = NULL;
  check(tilellm_session_create(m, &p, &s) == TILELLM_OK && tilellm_session_n_ctx(s) == 16, "a session of 16");
  check(tilellm_session_logits(s) == NULL, "no logits before an eval");
  int32_t ids[17];
  for (int i = 0; i < 17; ++i) ids[i] = 100 + 7 * i;
  expect_error(tilellm_session_eval(s, ids, 17), TILELLM_ERR_CONTEXT_FULL, "context size is 16",
               "17 tokens into a context of 16");
  check(tilellm_session_n_past(s) == 0, "... leaves the session empty");
  const int32_t bad = -3;
  expect_error(tilellm_session_eval(s, &bad, 1), TILELLM_ERR_INVALID_ARGUMENT, "outside the vocabulary",
               "token -3");
  check(tilellm_session_eval(s, ids, 16) == TILELLM_OK && tilellm_session_n_past(s) == 16 &&
            tilellm_session_logits(s) != NULL,
        "16 tokens fit");
  int64_t nt = 0;
  const int32_t* toks = tilellm_session_tokens(s, &nt);
  check(nt == 16 && toks[15] == ids[15], "the session's tokens");
  expect_error(tilellm_session_eval(s, ids, 1), TILELLM_ERR_CONTEXT_FULL, "16 are already in it", "one more");

  tilellm_sampler* smp = NULL;
  tilellm_sampler_params sp = tilellm_sampler_default_params();
  sp.temperature = 0.0f;
  check(tilellm_sampler_create(m, &sp, &smp) == TILELLM_OK, "a greedy sampler");
  tilellm_generate_params gp = tilellm_generate_default_params();
  tilellm_generate_result res;
  memset(&res, 0, sizeof res);
  expect_error(tilellm_generate(s, smp, ids, 1, &gp, &res), TILELLM_ERR_CONTEXT_FULL, "context holds 16",
               "generate with a prompt past the context");
  check(tilellm_session_truncate(s, 10) == TILELLM_OK && tilellm_session_n_past(s) == 10 &&
            tilellm_session_logits(s) == NULL,
        "truncate to 10 forgets the logits");
  expect_error(tilellm_session_truncate(s, -1), TILELLM_ERR_INVALID_ARGUMENT, "n_keep", "truncate -1");
  expect_error(tilellm_generate(s, smp, NULL, 0, &gp, &res), TILELLM_ERR_INVALID_ARGUMENT, "no logits",
               "generate with no prompt and no logits");
  int32_t tok = 0;
  expect_error(tilellm_sampler_sample(smp, s, &tok), TILELLM_ERR_INVALID_ARGUMENT, "no logits",
               "sample with no logits");
  /* The context fills up while generating: a normal stop. */
  gp.n_predict = 100;
  const tilellm_status st = tilellm_generate(s, smp, ids + 10, 2, &gp, &res);
  check(st == TILELLM_OK && res.stop == TILELLM_STOP_CONTEXT_FULL && tilellm_session_n_past(s) == 16 &&
            res.n_prompt == 2 && res.n_generated == 5,
        "generation ends at a full context (stop %d, %lld generated)", (int)res.stop,
        (long long)res.n_generated);
  gp.n_predict = -5;
  expect_error(tilellm_generate(s, smp, NULL, 0, &gp, &res), TILELLM_ERR_INVALID_ARGUMENT, "n_predict",
               "n_predict -5");
  tilellm_sampler_params badp = tilellm_sampler_default_params();
  badp.top_p = 0.0f;
  tilellm_sampler* b = (tilellm_sampler*)1;
  expect_error(tilellm_sampler_create(m, &badp, &b), TILELLM_ERR_INVALID_ARGUMENT, "top_p", "top_p 0");
  check(b == NULL, "... sets *out to NULL");
  expect_error(tilellm_sampler_accept(smp, 49152), TILELLM_ERR_INVALID_ARGUMENT, "49152",
               "accept an id past the vocabulary");
  tilellm_sampler_free(smp);
  tilellm_session_free(s);
}

struct collect {
  int32_t tokens[256];
  int n;
  int stop_after;          /* return false after this many (0: never) */
  tilellm_session* cancel; /* ask it to cancel after cancel_after tokens */
  int cancel_after;
};

static bool collect_token(int32_t token, const char* piece, size_t len, void* user) {
  struct collect* c = user;
  (void)piece, (void)len;
  if (c->n < 256) c->tokens[c->n++] = token;
  if (c->cancel && c->n == c->cancel_after) tilellm_session_cancel(c->cancel);
  return c->stop_after == 0 || c->n < c->stop_after;
}

static void greedy(const tilellm_model* m, tilellm_session* s, const int32_t* prompt, int64_t n_prompt, int n,
                   struct collect* out, tilellm_generate_result* res) {
  tilellm_sampler_params sp = tilellm_sampler_default_params();
  sp.temperature = 0.0f;
  tilellm_sampler* smp = NULL;
  tilellm_sampler_create(m, &sp, &smp);
  tilellm_generate_params gp = tilellm_generate_default_params();
  gp.n_predict = n;
  gp.ignore_eos = true;
  gp.on_token = collect_token;
  gp.user_data = out;
  const tilellm_status st = tilellm_generate(s, smp, prompt, n_prompt, &gp, res);
  if (st != TILELLM_OK) check(false, "generate: %s", tilellm_last_error());
  tilellm_sampler_free(smp);
}

static void test_generate_save_restore(const tilellm_model* m) {
  const char* text = "The printing press changed";
  int32_t prompt[32];
  size_t np = 0;
  tilellm_tokenize(m, text, strlen(text), true, false, prompt, 32, &np);
  tilellm_session_params p = small_params(96);
  tilellm_generate_result res;
  memset(&res, 0, sizeof res);

  /* Uninterrupted. */
  struct collect whole = {{0}, 0, 0, NULL, 0};
  tilellm_session* a = NULL;
  tilellm_session_create(m, &p, &a);
  greedy(m, a, prompt, (int64_t)np, 20, &whole, &res);
  check(whole.n == 20 && res.stop == TILELLM_STOP_LENGTH && res.n_generated == 20 &&
            res.n_prompt == (int64_t)np,
        "20 greedy tokens (stop %d)", (int)res.stop);

  /* The logits the API hands out are what the sampler picks from. */
  tilellm_session* c = NULL;
  tilellm_session_create(m, &p, &c);
  tilellm_session_eval(c, prompt, (int64_t)np);
  check(argmax(tilellm_session_logits(c), 49152) == whole.tokens[0],
        "argmax of the logits is the first greedy token");

  /* Saved after the prompt, restored into a new session, generation goes on from the saved logits. */
  check(tilellm_session_save(c, tmp_file("state.bin")) == TILELLM_OK, "save after the prompt");
  tilellm_session_free(c);
  tilellm_session* b = NULL;
  tilellm_session_create(m, &p, &b);
  const tilellm_status st = tilellm_session_load(b, tmp_file("state.bin"));
  check(st == TILELLM_OK && tilellm_session_n_past(b) == (int64_t)np, "load into a new session: %lld tokens",
        (long long)tilellm_session_n_past(b));
  struct collect resumed = {{0}, 0, 0, NULL, 0};
  greedy(m, b, NULL, 0, 20, &resumed, &res);
  check(
      resumed.n == 20 && memcmp(resumed.tokens, whole.tokens, sizeof(int32_t) * 20) == 0 && res.n_prompt == 0,
      "the restored session generates the uninterrupted tokens");

  /* Refusals. */
  expect_error(tilellm_session_save(b, tmp_file("no/such/dir/state.bin")), TILELLM_ERR_IO, "cannot write",
               "save into a missing folder");
  expect_error(tilellm_session_load(b, tmp_file("nothing.bin")), TILELLM_ERR_IO, "cannot open",
               "load a missing file");
  unsigned char* bytes = NULL;
  const size_t n = read_file(tmp_file("state.bin"), &bytes);
  write_file(tmp_file("cut.bin"), bytes, n - 9);
  expect_error(tilellm_session_load(b, tmp_file("cut.bin")), TILELLM_ERR_STATE_CORRUPT, "truncated",
               "a truncated file");
  bytes[n / 2] ^= 1;
  write_file(tmp_file("flip.bin"), bytes, n);
  expect_error(tilellm_session_load(b, tmp_file("flip.bin")), TILELLM_ERR_STATE_CORRUPT, "checksum",
               "a damaged file");
  free(bytes);
  tilellm_session_params other = small_params(64);
  tilellm_session* o = NULL;
  tilellm_session_create(m, &other, &o);
  expect_error(tilellm_session_load(o, tmp_file("state.bin")), TILELLM_ERR_STATE_MISMATCH,
               "context of 96 tokens", "a file of another context size");
  tilellm_session_free(o);
  other = small_params(96);
  other.kv_type = TILELLM_KV_F32;
  tilellm_session_create(m, &other, &o);
  expect_error(tilellm_session_load(o, tmp_file("state.bin")), TILELLM_ERR_STATE_MISMATCH, "KV cache is f16",
               "a file of another cache type");
  tilellm_session_free(o);

  /* The callback stops; a cancel request stops the next token and is consumed. */
  tilellm_session_truncate(b, 0);
  struct collect stop = {{0}, 0, 3, NULL, 0};
  greedy(m, b, prompt, (int64_t)np, 20, &stop, &res);
  check(stop.n == 3 && res.stop == TILELLM_STOP_CALLBACK && res.n_generated == 3,
        "the callback stops after 3");
  tilellm_session_truncate(b, 0);
  struct collect cancel = {{0}, 0, 0, b, 5};
  greedy(m, b, prompt, (int64_t)np, 20, &cancel, &res);
  check(cancel.n == 5 && res.stop == TILELLM_STOP_CANCELLED && res.n_generated == 5,
        "a cancel after 5 tokens stops there");
  tilellm_session_truncate(b, 0);
  struct collect after = {{0}, 0, 0, NULL, 0};
  greedy(m, b, prompt, (int64_t)np, 20, &after, &res);
  check(after.n == 20 && res.stop == TILELLM_STOP_LENGTH &&
            memcmp(after.tokens, whole.tokens, sizeof(int32_t) * 20) == 0,
        "the next generation runs whole (the request was consumed)");
  tilellm_session_cancel(b);
  tilellm_session_truncate(b, 0);
  struct collect early = {{0}, 0, 0, NULL, 0};
  greedy(m, b, prompt, (int64_t)np, 20, &early, &res);
  check(early.n == 0 && res.stop == TILELLM_STOP_CANCELLED && res.n_prompt == 0,
        "a request made before a generation stops it before its first batch");

  tilellm_session_free(a);
  tilellm_session_free(b);
}

static void test_model_outlives_free(const char* path) {
  tilellm_model* m = NULL;
  tilellm_model_load(path, NULL, &m);
  tilellm_session_params p = small_params(32);
  tilellm_session* s = NULL;
  tilellm_session_create(m, &p, &s);
  tilellm_model_free(m); /* the session keeps it alive */
  const int32_t ids[3] = {504, 2365, 6354};
  check(tilellm_session_eval(s, ids, 3) == TILELLM_OK && tilellm_session_logits(s) != NULL,
        "a session runs after its model handle was freed");
  tilellm_session_free(s);
  tilellm_model_free(NULL);
  tilellm_session_free(NULL);
  tilellm_sampler_free(NULL);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
    return 2;
  }
  snprintf(g_tmp, sizeof g_tmp, "/tmp/tilellm_c_api_%d", (int)getpid());
  char cmd[600];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", g_tmp);
  if (system(cmd) != 0) return 2;

  test_library();
  tilellm_model* m = test_model_load(argv[1]);
  if (!m) return 1;
  test_model_info(m);
  test_tokenizer(m);
  test_session_options(m);
  test_eval_and_overflow(m);
  test_generate_save_restore(m);
  tilellm_model_free(m);
  test_model_outlives_free(argv[1]);

  snprintf(cmd, sizeof cmd, "rm -rf %s", g_tmp);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
  printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
