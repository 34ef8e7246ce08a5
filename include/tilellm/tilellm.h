/*
 * tilellm.h: the C API of TileLLM, an on-device LLM inference engine for GGUF models (C99; libtilellm.so).
 *
 * This header is the documentation. A program loads a model, opens a session on it (the static KV cache and
 * the backend that runs the layers), and generates:
 *
 *   #include <stdio.h>
 *   #include <string.h>
 *   #include <tilellm/tilellm.h>
 *
 *   static bool print_piece(int32_t token, const char *piece, size_t len, void *user) {
 *     (void)token, (void)user;
 *     fwrite(piece, 1, len, stdout);
 *     return true;                                     // false stops the generation
 *   }
 *
 *   int main(void) {
 *     tilellm_model *model = NULL;
 *     tilellm_session *session = NULL;
 *     tilellm_sampler *sampler = NULL;
 *     if (tilellm_model_load("models/SmolLM2-135M-Instruct.Q4_1.gguf", NULL, &model) != TILELLM_OK) {
 *       fprintf(stderr, "error: %s\n", tilellm_last_error());   // the cause, on one line
 *       return 1;
 *     }
 *     tilellm_session_params sp = tilellm_session_default_params();
 *     sp.n_ctx = 512;                                   // tokens the KV cache holds
 *     tilellm_sampler_params samp = tilellm_sampler_default_params();
 *     samp.temperature = 0.0f;                          // greedy
 *     int32_t prompt[256];
 *     size_t n_prompt = 0;
 *     const char *text = "The capital of France is";
 *     if (tilellm_session_create(model, &sp, &session) != TILELLM_OK ||
 *         tilellm_sampler_create(model, &samp, &sampler) != TILELLM_OK ||
 *         tilellm_tokenize(model, text, strlen(text), true, false, prompt, 256, &n_prompt) != TILELLM_OK) {
 *       fprintf(stderr, "error: %s\n", tilellm_last_error());
 *       return 1;
 *     }
 *     tilellm_generate_params gp = tilellm_generate_default_params();
 *     gp.n_predict = 32;
 *     gp.on_token = print_piece;
 *     fputs(text, stdout);
 *     if (tilellm_generate(session, sampler, prompt, (int64_t)n_prompt, &gp, NULL) != TILELLM_OK)
 *       fprintf(stderr, "error: %s\n", tilellm_last_error());
 *     putchar('\n');
 *     tilellm_sampler_free(sampler);
 *     tilellm_session_free(session);
 *     tilellm_model_free(model);
 *     return 0;
 *   }
 *
 * Build it against an installed TileLLM with pkg-config:
 *   cc -std=c99 prog.c $(pkg-config --cflags --libs tilellm) -o prog
 * (examples/simple.c is this program with its arguments; docs/C_API.md gives an overview.)
 *
 * Conventions
 * - Every function that can fail returns a tilellm_status. On failure, tilellm_last_error() gives a one-line
 *   message naming the cause (the file, the option, the sizes), for the calling thread; calls that succeed
 *   leave it as it was. No C++ exception or type crosses this interface.
 * - Objects are opaque and freed by their _free function (NULL is accepted there). A session keeps its
 *   model alive: a model may be freed while sessions on it remain, and is released with the last of them.
 * - Threads: a model may be shared by any number of sessions on any threads (it is immutable after load);
 *   a session and a sampler are used by one thread at a time. tilellm_session_cancel may be called from any
 *   thread or from a signal handler. Different sessions run concurrently and independently.
 * - Strings are UTF-8. Strings the library returns (const char *) stay valid as long as the object they come
 *   from (the library itself for version and backend information); never free them.
 * - Output buffers: a function writing into (buf, capacity) stores the size it needs in *n_out; when the
 *   buffer is too small it writes nothing and returns TILELLM_ERR_BUFFER_TOO_SMALL, so a call with capacity 0
 *   asks for the size. Text is written with a terminating NUL, which *n_out does not count (capacity must
 *   leave room for it).
 * - Parameter structs are filled by their _default_params() function first, then changed field by field.
 */
#ifndef TILELLM_H
#define TILELLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TILELLM_VERSION_MAJOR 0
#define TILELLM_VERSION_MINOR 1
#define TILELLM_VERSION_PATCH 0

#if defined(__GNUC__)
#define TILELLM_API __attribute__((visibility("default")))
#else
#define TILELLM_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------------
 * Status codes and errors
 */
typedef enum tilellm_status {
  TILELLM_OK = 0,
  TILELLM_ERR_INVALID_ARGUMENT = 1, /* a null pointer, a value out of range, an unknown name or option */
  TILELLM_ERR_IO = 2,               /* a file that cannot be opened, read or written */
  TILELLM_ERR_MODEL = 3,            /* a model file that is broken or that this engine does not support */
  TILELLM_ERR_BACKEND = 4,          /* a backend or device that this build or machine lacks, or that failed */
  TILELLM_ERR_CONTEXT_FULL = 5,     /* tokens that do not fit in the session's context */
  TILELLM_ERR_OUT_OF_MEMORY = 6,    /* more memory than this machine has (refused before allocating) */
  TILELLM_ERR_STATE_MISMATCH = 7,   /* a saved session of another model, context size or KV cache type */
  TILELLM_ERR_STATE_CORRUPT = 8,    /* a saved session that is truncated or damaged */
  TILELLM_ERR_BUFFER_TOO_SMALL = 9, /* an output buffer too small: *n_out says the size needed */
  TILELLM_ERR_CANCELLED = 10,       /* a model load stopped by its progress callback */
  TILELLM_ERR_INTERNAL = 11         /* a defect of the library: the message says where */
} tilellm_status;

/* The last error message of the calling thread ("" when none). Valid until the thread's next failing call. */
TILELLM_API const char* tilellm_last_error(void);
/* The name of a status code ("TILELLM_ERR_IO"); "unknown status" for any other value. */
TILELLM_API const char* tilellm_status_name(tilellm_status status);

/* ---------------------------------------------------------------------------------------------------------
 * Library
 */
/* "0.1.0": the version of the library loaded (compare with the TILELLM_VERSION_* the program was built with).
 */
TILELLM_API const char* tilellm_version(void);
/* One line: version, the commit it was built from, the compiler, and the CPU instruction set in use. */
TILELLM_API const char* tilellm_build_info(void);

/* ---------------------------------------------------------------------------------------------------------
 * Backends and devices (the backend registry: `tilellm devices` lists the same)
 */
typedef struct tilellm_backend_info {
  const char* name;        /* "cpu", "opencl", "vulkan": what tilellm_session_params.backend names */
  int32_t mnn_type;        /* MNN's backend number: 0 CPU, 2 CUDA, 3 OpenCL, 7 Vulkan */
  bool is_host;            /* the host backend (the CPU): the reference of every other */
  const char* summary;     /* one line: what it runs on */
  bool available;          /* whether it can run on this machine */
  const char* unavailable; /* why not (one line), or "" when available */
  int32_t n_devices;       /* devices it sees (0 when unavailable) */
} tilellm_backend_info;

typedef struct tilellm_device_info {
  const char* name;    /* the device's name */
  const char* summary; /* "key: value" pairs joined by " | " (driver, API version, instruction set) */
  const char* details; /* the capability struct as "  key: value" lines */
  bool emulated;       /* a GPU API implemented on the host CPU (lavapipe, PoCL's CPU device) */
} tilellm_device_info;

/* The number of backends this build has (available here or not). */
TILELLM_API int32_t tilellm_backend_count(void);
/* Backend `index` < tilellm_backend_count(), the host backend first. */
TILELLM_API tilellm_status tilellm_backend_get_info(int32_t index, tilellm_backend_info* out);
/* Device `device` of the backend named `backend`. */
TILELLM_API tilellm_status tilellm_device_get_info(const char* backend, int32_t device,
                                                   tilellm_device_info* out);

/* ---------------------------------------------------------------------------------------------------------
 * Models
 */
typedef struct tilellm_model tilellm_model;

/* Called while a model loads with the fraction done (0 to 1); returning false stops the load, which then
 * fails with TILELLM_ERR_CANCELLED. */
typedef bool (*tilellm_progress_callback)(float fraction, void* user_data);

typedef struct tilellm_model_params {
  tilellm_progress_callback progress; /* NULL: no progress reports */
  void* progress_user_data;
} tilellm_model_params;

TILELLM_API tilellm_model_params tilellm_model_default_params(void);
/* Maps and checks a GGUF file (every tensor bound, the tokenizer built). params NULL: the defaults.
 * TILELLM_ERR_IO when the file cannot be opened, TILELLM_ERR_MODEL when it is broken or unsupported. */
TILELLM_API tilellm_status tilellm_model_load(const char* path, const tilellm_model_params* params,
                                              tilellm_model** out);
TILELLM_API void tilellm_model_free(tilellm_model* model);

typedef struct tilellm_model_info {
  const char* architecture; /* general.architecture: "llama", "gemma3", "qwen2", "qwen3", "phi3" */
  const char* name;         /* general.name ("" when the file has none) */
  const char* path;         /* the file loaded */
  int64_t n_params;         /* elements of every tensor */
  uint64_t n_bytes;         /* bytes of every tensor in the file */
  int32_t n_vocab;
  int32_t n_embd;
  int32_t n_layer;
  int32_t n_head;
  int32_t n_head_kv;
  int32_t head_dim;
  int32_t n_ctx_train; /* the context the model was trained with */
} tilellm_model_info;

TILELLM_API tilellm_status tilellm_model_get_info(const tilellm_model* model, tilellm_model_info* out);
/* The model file's metadata: count, the i-th key (NULL when out of range), and any key's value as text
 * (numbers in decimal, booleans true/false, strings as they are, arrays as "[n items of TYPE]"). A key the
 * file lacks is TILELLM_ERR_INVALID_ARGUMENT. */
TILELLM_API int32_t tilellm_model_meta_count(const tilellm_model* model);
TILELLM_API const char* tilellm_model_meta_key(const tilellm_model* model, int32_t i);
TILELLM_API tilellm_status tilellm_model_meta_value(const tilellm_model* model, const char* key, char* buf,
                                                    size_t capacity, size_t* n_out);

/* ---------------------------------------------------------------------------------------------------------
 * Tokenizer (from the model file; equal to llama.cpp's tokenization)
 */
/* Text (text_len bytes) to token ids. add_special: the BOS (and EOS) the model's metadata asks for;
 * parse_special: control-token texts ("<|im_start|>") become their ids. *n_out: the number of tokens. */
TILELLM_API tilellm_status tilellm_tokenize(const tilellm_model* model, const char* text, size_t text_len,
                                            bool add_special, bool parse_special, int32_t* tokens,
                                            size_t capacity, size_t* n_out);
/* Token ids to text; render_special: control tokens as their text (else they give nothing). */
TILELLM_API tilellm_status tilellm_detokenize(const tilellm_model* model, const int32_t* tokens,
                                              size_t n_tokens, bool render_special, char* buf,
                                              size_t capacity, size_t* n_out);
/* The bytes of one token as generation prints them (a piece may end inside a UTF-8 character). */
TILELLM_API tilellm_status tilellm_token_to_piece(const tilellm_model* model, int32_t token,
                                                  bool render_special, char* buf, size_t capacity,
                                                  size_t* n_out);

typedef enum tilellm_special_token {
  TILELLM_TOKEN_BOS = 0, /* beginning of sequence */
  TILELLM_TOKEN_EOS = 1, /* end of sequence */
  TILELLM_TOKEN_EOT = 2, /* end of turn (<|im_end|>, <end_of_turn>, ...) */
  TILELLM_TOKEN_UNK = 3,
  TILELLM_TOKEN_PAD = 4
} tilellm_special_token;

/* The id of a special token, or -1 when the model has none. */
TILELLM_API int32_t tilellm_token_special(const tilellm_model* model, tilellm_special_token which);
/* Whether a token ends generation (EOS, EOT and every token the model's vocabulary marks so). */
TILELLM_API bool tilellm_token_is_eog(const tilellm_model* model, int32_t token);
/* Whether a token is a control token (rendered only with render_special). */
TILELLM_API bool tilellm_token_is_control(const tilellm_model* model, int32_t token);
/* The raw vocabulary text of a token (SentencePiece texts keep their "▁"); "" when out of range. */
TILELLM_API const char* tilellm_token_text(const tilellm_model* model, int32_t token);

typedef struct tilellm_chat_message {
  const char* role; /* "system", "user", "assistant" */
  const char* content;
} tilellm_chat_message;

/* Renders a conversation with a chat template: the model's own (template NULL or "") or a built-in format
 * by name ("chatml", "gemma", "llama2", "llama3", "phi3"). add_assistant: end with the opening of the
 * assistant's turn. The text holds special-token texts: tokenize it with parse_special true. */
TILELLM_API tilellm_status tilellm_chat_apply(const tilellm_model* model, const char* chat_template,
                                              const tilellm_chat_message* messages, size_t n_messages,
                                              bool add_assistant, char* buf, size_t capacity, size_t* n_out);

/* ---------------------------------------------------------------------------------------------------------
 * Sessions: one conversation's state (the KV cache, allocated once when the session is made, the cached
 * tokens, the last logits) on a backend
 */
typedef struct tilellm_session tilellm_session;

typedef enum tilellm_kv_type { TILELLM_KV_F16 = 0, TILELLM_KV_F32 = 1 } tilellm_kv_type;

/* How the weight matrices are held (docs/DESIGN.md): as in the file (repacked losslessly into tiles), or
 * converted at load. */
typedef enum tilellm_weights_mode {
  TILELLM_WEIGHTS_NATIVE = 0,
  TILELLM_WEIGHTS_INT4B64 = 1, /* 4-bit, a scale and offset per 64 inputs (MNN's Int4-Block64) */
  TILELLM_WEIGHTS_INT8B0 = 2,  /* 8-bit, a scale and offset per output row (MNN's Int8-Block0) */
  TILELLM_WEIGHTS_INT4B0 = 3,  /* 4-bit, a scale and offset per output row */
  TILELLM_WEIGHTS_F16 = 4,
  TILELLM_WEIGHTS_F32 = 5
} tilellm_weights_mode;

typedef enum tilellm_activations {
  TILELLM_ACTIVATIONS_Q8 = 0, /* quantized per weight type as llama.cpp does (fast) */
  TILELLM_ACTIVATIONS_F32 = 1 /* the exact float path */
} tilellm_activations;

typedef enum tilellm_prefill {
  TILELLM_PREFILL_DEVICE = 0, /* prompts run on the session's backend */
  TILELLM_PREFILL_CPU = 1,    /* device backends: prompts run on the CPU, decoding on the device */
  TILELLM_PREFILL_AUTO = 2    /* device backends: where a prompt batch timed at the start ran faster */
} tilellm_prefill;

typedef struct tilellm_session_params {
  const char* backend;     /* a backend's name (tilellm_backend_get_info); NULL or "cpu": the CPU */
  int32_t device;          /* index into that backend's devices; -1 (the default): its first device that is
                              not emulated on the CPU (tilellm_device_info.emulated), else 0 */
  int32_t n_threads;       /* CPU threads; 0: the CPUs the process may use */
  int64_t n_ctx;           /* tokens the KV cache holds; 0: the model's training context, at most 4096 */
  int64_t n_batch;         /* prompt tokens per forward pass; 0: the backend's own (64 on the CPU, 512 on GPUs) */
  tilellm_kv_type kv_type; /* the KV cache's element type (F16) */
  tilellm_weights_mode weights;
  tilellm_activations activations;
  tilellm_prefill prefill;
  const char*
      device_profile; /* GPU backends: clamp the device to a GPU family ("powervr-rogue", ...); NULL: none */
  /* The backend's own options as "name=value" strings (the flags of its group in `tilellm run --help`
   * without their dashes, e.g. "isa=avx2" for the CPU, "cl-cache=off" for OpenCL), n_backend_options of
   * them. An option the backend does not have is TILELLM_ERR_INVALID_ARGUMENT. (The CPU's isa sets the
   * instruction set of every session of the process from then on, as `tilellm run --isa` does.) */
  const char* const* backend_options;
  size_t n_backend_options;
  bool logits_all; /* keep the logits of every token of an eval (tilellm_session_logits_at) */
} tilellm_session_params;

TILELLM_API tilellm_session_params tilellm_session_default_params(void);
/* Makes a session (params NULL: the defaults): TILELLM_ERR_INVALID_ARGUMENT for a bad option,
 * TILELLM_ERR_BACKEND when the backend or device cannot be used, TILELLM_ERR_OUT_OF_MEMORY for a context
 * the machine cannot hold. */
TILELLM_API tilellm_status tilellm_session_create(const tilellm_model* model,
                                                  const tilellm_session_params* params,
                                                  tilellm_session** out);
TILELLM_API void tilellm_session_free(tilellm_session* session);

TILELLM_API int64_t tilellm_session_n_ctx(const tilellm_session* session);
/* Prompt tokens a forward pass takes (params.n_batch, or the backend's own for 0). */
TILELLM_API int64_t tilellm_session_n_batch(const tilellm_session* session);
/* Tokens in the cache (positions [0, n_past)). */
TILELLM_API int64_t tilellm_session_n_past(const tilellm_session* session);
/* The tokens in the cache, *n_tokens of them; valid until the session changes. */
TILELLM_API const int32_t* tilellm_session_tokens(const tilellm_session* session, int64_t* n_tokens);
/* The name of the backend running the session ("cpu", "opencl", ...). */
TILELLM_API const char* tilellm_session_backend(const tilellm_session* session);

/* Appends n_tokens tokens to the cache and runs them through the model. TILELLM_ERR_CONTEXT_FULL (the
 * session unchanged) when they do not fit; a token outside the vocabulary is TILELLM_ERR_INVALID_ARGUMENT. */
TILELLM_API tilellm_status tilellm_session_eval(tilellm_session* session, const int32_t* tokens,
                                                int64_t n_tokens);
/* The logits [n_vocab] of the last token evaluated (or restored); NULL when the session holds none. Valid
 * until the session changes. */
TILELLM_API const float* tilellm_session_logits(const tilellm_session* session);
/* With logits_all: the logits of the i-th token of the last eval; NULL otherwise or when i is out of range.
 */
TILELLM_API const float* tilellm_session_logits_at(const tilellm_session* session, int64_t i);
/* Forgets the cached tokens from position n_keep on (0: all of them). */
TILELLM_API tilellm_status tilellm_session_truncate(tilellm_session* session, int64_t n_keep);

/* Writes the cached tokens, their KV rows (from the device when the backend keeps them there) and the last
 * logits to a file, through a temporary file renamed at the end (a failed save leaves no partial file). */
TILELLM_API tilellm_status tilellm_session_save(tilellm_session* session, const char* path);
/* Replaces the session's state with a saved one. A file from another model, context size or KV cache type
 * is TILELLM_ERR_STATE_MISMATCH, a truncated or damaged one TILELLM_ERR_STATE_CORRUPT; the session is then
 * unchanged. Generating on from a restored session gives exactly the tokens the saved one would have. */
TILELLM_API tilellm_status tilellm_session_load(tilellm_session* session, const char* path);

/* Asks a tilellm_generate running on this session to stop before its next prompt batch or token (it then
 * returns TILELLM_OK with stop TILELLM_STOP_CANCELLED). Safe from any thread and from a signal handler. The
 * request is consumed by the generation it stops; one made while none runs stops the next one at once. */
TILELLM_API void tilellm_session_cancel(tilellm_session* session);

/* ---------------------------------------------------------------------------------------------------------
 * Sampling: a chain applied in this order (llama.cpp's default order): repetition penalty -> top-k ->
 * top-p -> min-p -> temperature -> a draw from what is left. Temperature 0 is greedy (the highest logit,
 * ties to the lowest id). A stage set to its "off" value is skipped. The same seed, tokens and logits give
 * the same choices on every machine.
 */
typedef struct tilellm_sampler tilellm_sampler;

#define TILELLM_SEED_RANDOM UINT64_MAX /* draw a seed (tilellm_sampler_seed tells which) */

typedef struct tilellm_sampler_params {
  float temperature;     /* 0.8; <= 0: greedy */
  int32_t top_k;         /* 40; <= 0: off */
  float top_p;           /* 0.95; in (0, 1], 1: off */
  float min_p;           /* 0.05; <= 0: off */
  float repeat_penalty;  /* 1.0 (off); > 0 */
  int32_t repeat_last_n; /* 64: accepted tokens the penalty looks back on; 0: off */
  uint64_t seed;         /* TILELLM_SEED_RANDOM by default */
} tilellm_sampler_params;

TILELLM_API tilellm_sampler_params tilellm_sampler_default_params(void);
TILELLM_API tilellm_status tilellm_sampler_create(const tilellm_model* model,
                                                  const tilellm_sampler_params* params,
                                                  tilellm_sampler** out);
TILELLM_API void tilellm_sampler_free(tilellm_sampler* sampler);
/* Picks a token from the session's logits (TILELLM_ERR_INVALID_ARGUMENT when it holds none). The token is
 * not recorded: call tilellm_sampler_accept with it, as with every prompt token, for the penalty. */
TILELLM_API tilellm_status tilellm_sampler_sample(tilellm_sampler* sampler, const tilellm_session* session,
                                                  int32_t* token);
/* The same from any logits [n_vocab]. */
TILELLM_API tilellm_status tilellm_sampler_sample_logits(tilellm_sampler* sampler, const float* logits,
                                                         int32_t* token);
TILELLM_API tilellm_status tilellm_sampler_accept(tilellm_sampler* sampler, int32_t token);
/* Forgets the accepted tokens and reseeds: a reset sampler repeats its choices. */
TILELLM_API void tilellm_sampler_reset(tilellm_sampler* sampler);
TILELLM_API uint64_t tilellm_sampler_seed(const tilellm_sampler* sampler);

/* ---------------------------------------------------------------------------------------------------------
 * Generation
 */
/* Called with each generated token and its bytes (a piece may end inside a UTF-8 character: the pieces
 * concatenated are the text). Returning false stops the generation (TILELLM_STOP_CALLBACK). */
typedef bool (*tilellm_token_callback)(int32_t token, const char* piece, size_t piece_len, void* user_data);

typedef enum tilellm_stop_reason {
  TILELLM_STOP_LENGTH = 0,       /* n_predict tokens generated */
  TILELLM_STOP_EOG = 1,          /* an end-of-generation token (not passed to the callback) */
  TILELLM_STOP_CONTEXT_FULL = 2, /* the context is full */
  TILELLM_STOP_CALLBACK = 3,     /* the token callback returned false */
  TILELLM_STOP_CANCELLED = 4     /* tilellm_session_cancel */
} tilellm_stop_reason;

typedef struct tilellm_generate_params {
  int64_t
      n_predict;   /* most tokens to generate (128); -1: until an end-of-generation token or a full context */
  bool ignore_eos; /* go on past end-of-generation tokens, passing them to the callback */
  tilellm_token_callback on_token; /* NULL: none */
  void* user_data;
} tilellm_generate_params;

typedef struct tilellm_generate_result {
  int64_t n_prompt;    /* prompt tokens evaluated */
  int64_t n_generated; /* tokens passed to the callback */
  double prompt_ms;    /* time evaluating the prompt */
  double generate_ms;  /* time from the first sampled token to the last */
  tilellm_stop_reason stop;
} tilellm_generate_result;

TILELLM_API tilellm_generate_params tilellm_generate_default_params(void);
/* Appends the prompt to the session (n_prompt 0: go on from the session's logits, e.g. after
 * tilellm_session_load), passing each prompt token to the sampler, then samples, calls on_token and
 * evaluates token by token, as `tilellm run` does. A prompt that does not fit in the context is
 * TILELLM_ERR_CONTEXT_FULL (the session unchanged); a context that fills up while generating ends it
 * normally (TILELLM_STOP_CONTEXT_FULL). result may be NULL. */
TILELLM_API tilellm_status tilellm_generate(tilellm_session* session, tilellm_sampler* sampler,
                                            const int32_t* prompt, int64_t n_prompt,
                                            const tilellm_generate_params* params,
                                            tilellm_generate_result* result);

#ifdef __cplusplus
}
#endif

#endif /* TILELLM_H */
