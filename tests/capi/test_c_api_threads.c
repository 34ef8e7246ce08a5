/*
 * The C API from several threads at once (run under ThreadSanitizer by tests/capi/run_tsan.sh): two threads,
 * one model, a session each, generating at the same time. Each thread's tokens must equal what the same
 * prompt gives on one thread alone; each thread's last-error message is its own; a third thread cancels a
 * generation running on another.
 *
 *   test_c_api_threads MODEL.gguf [N_TOKENS]      (compiled as C99, with POSIX threads)
 */
#define _POSIX_C_SOURCE 200809L /* pthread barriers */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tilellm/tilellm.h>

#define MAX_TOKENS 64

static const tilellm_model* g_model;
static int g_n_tokens = 8;
static pthread_barrier_t g_barrier;

struct job {
  const char* prompt;
  int32_t tokens[MAX_TOKENS];
  int n;
  int ok;
  char error[256]; /* this thread's last-error message after its own failing call */
  const char* own; /* the missing file this thread tries to load */
};

static bool collect(int32_t token, const char* piece, size_t len, void* user) {
  struct job* j = user;
  (void)piece, (void)len;
  if (j->n < MAX_TOKENS) j->tokens[j->n++] = token;
  return true;
}

/* Greedy tokens of j->prompt on a session of its own. */
static int generate(struct job* j, int n_threads) {
  int32_t prompt[64];
  size_t np = 0;
  tilellm_session_params sp = tilellm_session_default_params();
  sp.n_ctx = 64;
  sp.n_threads = n_threads;
  tilellm_sampler_params samp = tilellm_sampler_default_params();
  samp.temperature = 0.0f;
  tilellm_generate_params gp = tilellm_generate_default_params();
  gp.n_predict = g_n_tokens;
  gp.ignore_eos = true;
  gp.on_token = collect;
  gp.user_data = j;
  tilellm_session* s = NULL;
  tilellm_sampler* smp = NULL;
  j->n = 0;
  int ok =
      tilellm_tokenize(g_model, j->prompt, strlen(j->prompt), true, false, prompt, 64, &np) == TILELLM_OK &&
      tilellm_session_create(g_model, &sp, &s) == TILELLM_OK &&
      tilellm_sampler_create(g_model, &samp, &smp) == TILELLM_OK &&
      tilellm_generate(s, smp, prompt, (int64_t)np, &gp, NULL) == TILELLM_OK;
  if (!ok) fprintf(stderr, "generate '%s': %s\n", j->prompt, tilellm_last_error());
  tilellm_sampler_free(smp);
  tilellm_session_free(s);
  return ok;
}

static void* worker(void* arg) {
  struct job* j = arg;
  tilellm_model* none = NULL;
  tilellm_backend_info b;
  /* Both threads fail at once, each with its own file, and ask the registry at once. */
  pthread_barrier_wait(&g_barrier);
  tilellm_model_load(j->own, NULL, &none);
  tilellm_backend_get_info(0, &b);
  (void)tilellm_token_text(g_model, 42);
  pthread_barrier_wait(&g_barrier);
  snprintf(j->error, sizeof j->error, "%s", tilellm_last_error());
  j->ok = generate(j, 2);
  return NULL;
}

/* A generation that runs until another thread cancels it. */
struct cancel_job {
  tilellm_session* session;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n;
  int done;
  tilellm_generate_result res;
  tilellm_status status;
};

static bool count_and_signal(int32_t token, const char* piece, size_t len, void* user) {
  struct cancel_job* c = user;
  (void)token, (void)piece, (void)len;
  pthread_mutex_lock(&c->mu);
  ++c->n;
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
  return true;
}

static void* endless(void* arg) {
  struct cancel_job* c = arg;
  int32_t prompt[16];
  size_t np = 0;
  tilellm_tokenize(g_model, "Once", 4, true, false, prompt, 16, &np);
  tilellm_sampler_params samp = tilellm_sampler_default_params();
  samp.temperature = 0.0f;
  tilellm_sampler* smp = NULL;
  tilellm_sampler_create(g_model, &samp, &smp);
  tilellm_generate_params gp = tilellm_generate_default_params();
  gp.n_predict = -1;
  gp.ignore_eos = true;
  gp.on_token = count_and_signal;
  gp.user_data = c;
  c->status = tilellm_generate(c->session, smp, prompt, (int64_t)np, &gp, &c->res);
  if (c->status != TILELLM_OK) fprintf(stderr, "generate: %s\n", tilellm_last_error());
  tilellm_sampler_free(smp);
  pthread_mutex_lock(&c->mu);
  c->done = 1; /* the main thread stops waiting for tokens */
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.gguf [N_TOKENS]\n", argv[0]);
    return 2;
  }
  if (argc > 2) g_n_tokens = atoi(argv[2]);
  if (g_n_tokens < 1 || g_n_tokens > MAX_TOKENS) g_n_tokens = 8;
  tilellm_model* model = NULL;
  if (tilellm_model_load(argv[1], NULL, &model) != TILELLM_OK) {
    fprintf(stderr, "load: %s\n", tilellm_last_error());
    return 1;
  }
  g_model = model;
  int failures = 0;

  struct job jobs[2] = {{"Once upon a time", {0}, 0, 0, "", "/nonexistent/first.gguf"},
                        {"The quick brown fox", {0}, 0, 0, "", "/nonexistent/second.gguf"}};
  struct job alone[2] = {{"Once upon a time", {0}, 0, 0, "", ""}, {"The quick brown fox", {0}, 0, 0, "", ""}};
  for (int i = 0; i < 2; ++i) {
    if (!generate(&alone[i], 2)) ++failures;
  }

  pthread_barrier_init(&g_barrier, NULL, 2);
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) pthread_create(&t[i], NULL, worker, &jobs[i]);
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&g_barrier);
  for (int i = 0; i < 2; ++i) {
    const int same = jobs[i].ok && jobs[i].n == alone[i].n && jobs[i].n == g_n_tokens &&
                     memcmp(jobs[i].tokens, alone[i].tokens, sizeof(int32_t) * (size_t)g_n_tokens) == 0;
    printf("%s thread %d: '%s' gives the tokens it gives alone (%d)\n", same ? "ok  " : "FAIL", i,
           jobs[i].prompt, jobs[i].n);
    const int own = strstr(jobs[i].error, jobs[i].own) != NULL;
    printf("%s thread %d: its last error is its own: %s\n", own ? "ok  " : "FAIL", i, jobs[i].error);
    failures += !same + !own;
  }

  struct cancel_job c;
  memset(&c, 0, sizeof c);
  pthread_mutex_init(&c.mu, NULL);
  pthread_cond_init(&c.cv, NULL);
  tilellm_session_params sp = tilellm_session_default_params();
  sp.n_ctx = 64;
  sp.n_threads = 2;
  if (tilellm_session_create(model, &sp, &c.session) != TILELLM_OK) {
    fprintf(stderr, "session: %s\n", tilellm_last_error());
    return 1;
  }
  pthread_t g;
  pthread_create(&g, NULL, endless, &c);
  pthread_mutex_lock(&c.mu);
  while (c.n < 3 && !c.done) pthread_cond_wait(&c.cv, &c.mu);
  pthread_mutex_unlock(&c.mu);
  tilellm_session_cancel(c.session);
  pthread_join(g, NULL);
  const int cancelled = c.status == TILELLM_OK && c.res.stop == TILELLM_STOP_CANCELLED &&
                        c.res.n_generated >= 3 && tilellm_session_n_past(c.session) < 64;
  printf("%s a generation cancelled from another thread stops (%lld tokens, stop %d)\n",
         cancelled ? "ok  " : "FAIL", (long long)c.res.n_generated, (int)c.res.stop);
  failures += !cancelled;
  tilellm_session_free(c.session);
  pthread_cond_destroy(&c.cv);
  pthread_mutex_destroy(&c.mu);
  tilellm_model_free(model);
  printf("%d failed\n", failures);
  return failures ? 1 : 0;
}
