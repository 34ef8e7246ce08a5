/*
 * simple.c: generate text from a prompt through TileLLM's C API (include/tilellm/tilellm.h) — the program at
 * the top of that header, with arguments. Greedy by default, so its text is `tilellm run --temp 0`'s.
 *
 *   cc -std=c99 examples/simple.c $(pkg-config --cflags --libs tilellm) -o tilellm-simple
 *   ./tilellm-simple MODEL.gguf "The capital of France is" [N_PREDICT [N_THREADS [TEMPERATURE]]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tilellm/tilellm.h>

static bool print_piece(int32_t token, const char* piece, size_t len, void* user_data) {
  (void)token;
  (void)user_data;
  fwrite(piece, 1, len, stdout);
  fflush(stdout);
  return true;
}

static int fail(const char* what) {
  fprintf(stderr, "error: %s: %s\n", what, tilellm_last_error());
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N_PREDICT [N_THREADS [TEMPERATURE]]]\n", argv[0]);
    return 2;
  }
  const char* prompt_text = argv[2];
  tilellm_model* model = NULL;
  tilellm_session* session = NULL;
  tilellm_sampler* sampler = NULL;
  int32_t* prompt = NULL;
  size_t n_prompt = 0;
  int rc = 0;

  if (tilellm_model_load(argv[1], NULL, &model) != TILELLM_OK) return fail("load");

  tilellm_session_params sp = tilellm_session_default_params();
  if (argc > 4) sp.n_threads = atoi(argv[4]);
  tilellm_sampler_params samp = tilellm_sampler_default_params();
  samp.temperature = argc > 5 ? (float)atof(argv[5]) : 0.0f;
  samp.seed = 42;
  tilellm_generate_params gp = tilellm_generate_default_params();
  gp.n_predict = argc > 3 ? atoll(argv[3]) : 64;
  gp.on_token = print_piece;

  /* The prompt's size first (capacity 0), then the tokens. */
  tilellm_status st =
      tilellm_tokenize(model, prompt_text, strlen(prompt_text), true, false, NULL, 0, &n_prompt);
  if (st != TILELLM_OK && st != TILELLM_ERR_BUFFER_TOO_SMALL) {
    rc = fail("tokenize");
    goto done;
  }
  prompt = malloc((n_prompt > 0 ? n_prompt : 1) * sizeof *prompt);
  if (!prompt || tilellm_tokenize(model, prompt_text, strlen(prompt_text), true, false, prompt, n_prompt,
                                  &n_prompt) != TILELLM_OK) {
    rc = fail("tokenize");
    goto done;
  }
  if (tilellm_session_create(model, &sp, &session) != TILELLM_OK) {
    rc = fail("session");
    goto done;
  }
  if (tilellm_sampler_create(model, &samp, &sampler) != TILELLM_OK) {
    rc = fail("sampler");
    goto done;
  }

  fputs(prompt_text, stdout);
  tilellm_generate_result res;
  if (tilellm_generate(session, sampler, prompt, (int64_t)n_prompt, &gp, &res) != TILELLM_OK) {
    putchar('\n');
    rc = fail("generate");
    goto done;
  }
  putchar('\n');
  fprintf(stderr, "prompt: %lld tokens, %.2f t/s | generated: %lld tokens, %.2f t/s\n",
          (long long)res.n_prompt, res.prompt_ms > 0 ? 1000.0 * (double)res.n_prompt / res.prompt_ms : 0.0,
          (long long)res.n_generated,
          res.generate_ms > 0 ? 1000.0 * (double)res.n_generated / res.generate_ms : 0.0);

done:
  free(prompt);
  tilellm_sampler_free(sampler);
  tilellm_session_free(session);
  tilellm_model_free(model);
  return rc;
}
