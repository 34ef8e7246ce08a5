#!/usr/bin/env python3
"""Independent float64 NumPy forward pass of a GGUF language model (the logits oracle).

Contract
--------
    logits = forward(model_path, tokens)      # float64 [n_tokens, n_vocab], logits of every position

is what the C++ engine's `tilellm dump-logits` must reproduce (relative L2 error per position, see
compare_logits.py). It is written from the model definitions, not from the engine: weights are dequantized by the
`gguf` package (gguf.quants.dequantize), all arithmetic after that is float64, attention is the plain
softmax(QK^T)V over the whole sequence with an explicit mask (no KV cache, no fused kernels).

Architectures (all hyper-parameters from GGUF metadata, nothing per model):
  llama   RMSNorm -> Q,K,V -> RoPE NORM mode -> GQA attention -> O -> residual;
          RMSNorm -> SwiGLU FFN -> residual; final RMSNorm; output = output.weight or the tied token_embd.
          RoPE NORM mode rotates adjacent pairs (x[2i], x[2i+1]): the GGUF converter permutes the Q/K rows of the
          Hugging Face checkpoint so that this is equivalent to HF's rotate_half.
  gemma3  embedding * sqrt(n_embd); RMSNorm (the GGUF norm weights already contain Gemma's "+1");
          per-head RMSNorm on Q and K (attn_q_norm/attn_k_norm) before RoPE NEOX mode (halves (x[i], x[i+d/2]));
          Q scaled by 1/sqrt(key_length); post_attention_norm / post_ffw_norm applied to the branch output before
          each residual add; FFN = GELU_tanh(gate) * up; interleaved sliding-window attention: layer il is local
          iff il % pattern < pattern - 1 (pattern 6 unless gemma3.attention.sliding_window_pattern says otherwise);
          local layers use rope.freq_base_swa (default 10000) and mask keys with q_pos - k_pos >= sliding_window;
          global layers use rope.freq_base.
  qwen2   llama's layer with RoPE NEOX mode and a bias on each of the Q, K and V products (attn_q.bias, ...).
  qwen3   llama's layer with RoPE NEOX mode and gemma3's per-head RMSNorm of Q and K before RoPE; its head size
          (key_length) need not be n_embd / n_head.
  phi3    llama's layer with RoPE NEOX mode, Q/K/V in one matrix (attn_qkv: rows q, then k, then v) and gate/up in
          one (ffn_up: 2 n_ff rows, the gate's first); with phi3.attention.sliding_window set every layer masks
          keys with q_pos - k_pos >= window (llama.cpp ignores the key). LongRoPE (Phi-3 128k): with
          rope_factors_short / rope_factors_long present, RoPE's per-pair frequencies are divided by the long
          factors when the context exceeds rope.scaling.original_context_length, else by the short ones, and cos
          and sin are multiplied by rope.scaling.attn_factor (so every q.k by its square).
  Experts (llama with llama.expert_count > 0, i.e. Mixtral; qwen2moe; qwen3moe): the FFN is a mixture. Per token
          h: logits = ffn_gate_inp h; probs = softmax(logits) (or <arch>.expert_gating_func: 2 sigmoid,
          3 softmax of the chosen logits, 4 sqrt(softplus)); the expert_used_count largest (lower index first
          on ties) with weights probs[e], divided by their sum (clamped at 2^-14) for llama and qwen3moe
          (<arch>.expert_weights_norm overrides), times <arch>.expert_weights_scale where set; output
          sum_e w_e * down_e(silu(gate_e h) * up_e h), expert e being slice e of the 3-D ffn_*_exps tensors.
          qwen2moe adds a shared expert, scaled by sigmoid(ffn_gate_inp_shexp . h). qwen2moe is qwen2's
          attention (q/k/v biases), qwen3moe qwen3's (per-head q/k norms).

Memory: every layer weight is dequantized once per process and cached (as float32, exactly what the dequantizer
returns, widened to float64 on use). The token embedding is never dequantized as a whole: only the rows of the
input tokens are, and the output projection runs over the vocabulary in chunks (Gemma 3's 262144 x 640 table would
be 1.3 GB in float64).

CLI
---
    python3 forward.py MODEL --tokens 1,2,3 --out logits.npy   # float32 .npy [n_tokens, n_vocab]
    python3 forward.py MODEL --tokens 1,2,3 --out l.npy --kv-f16  # K and V rounded to float16 (fp16 KV cache)
    python3 forward.py MODEL --tokens 1,2,3 --greedy 16         # greedy continuation (argmax ids), printed

Module: forward(path_or_model, tokens) -> logits; block(m, il, x) for one transformer block (used by
compare_logits.py to check llama.cpp block by block); perplexity(path, tokens, n_ctx, bos) by llama-perplexity's
recipe. Validation against llama.cpp: docs/REFERENCE.md.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field

import numpy as np

try:
    from gguf import GGUFReader
    from gguf.quants import dequantize
except ImportError as e:  # pragma: no cover - environment problem, reported clearly
    sys.exit(f"forward.py: the 'gguf' Python package is required ({e}); pip install gguf")

OUTPUT_CHUNK_ROWS = 16384  # vocabulary rows dequantized at a time for the output projection


@dataclass
class HParams:
    arch: str
    n_vocab: int
    n_embd: int
    n_layer: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim_k: int
    head_dim_v: int
    n_rot: int
    rope_base: float
    rope_base_swa: float
    rope_freq_scale: float
    rope_neox: bool
    eps: float
    attn_scale: float
    sliding_window: int             # 0: no sliding-window attention
    is_swa: list = field(default_factory=list)   # per layer: local (sliding-window) attention?
    final_logit_softcap: float = 0.0
    rope_attn_factor: float = 1.0
    n_ctx_orig: int = 0             # LongRoPE: long factors for contexts above it
    n_ctx_train: int = 0
    n_expert: int = 0               # 0: dense FFN
    n_expert_used: int = 0
    n_ff_exp: int = 0
    n_ff_shexp: int = 0
    gating: int = 1                 # 1 softmax, 2 sigmoid, 3 softmax of the chosen, 4 sqrt(softplus)
    norm_w: bool = False
    w_scale: float = 1.0


def _field(reader: GGUFReader, key: str, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


class Model:
    """A GGUF file opened for the reference forward pass. Weights are dequantized lazily and cached."""

    def __init__(self, path: str):
        self.path = path
        self.reader = GGUFReader(path)
        self.tensors = {t.name: t for t in self.reader.tensors}
        self._cache: dict[str, np.ndarray] = {}
        self.hp = self._read_hparams()
        # The context size a run assumes (LongRoPE picks its factors by it): the engine's default.
        self.n_ctx = min(self.hp.n_ctx_train, 4096)

    def rope_factors(self):
        """The per-pair divisors of RoPE's frequencies for this context: rope_freqs (llama), else LongRoPE's
        long or short set, else None."""
        if self.has("rope_freqs.weight"):
            return self.weight("rope_freqs.weight")
        if self.has("rope_factors_long.weight"):
            which = "long" if self.n_ctx > self.hp.n_ctx_orig else "short"
            return self.weight(f"rope_factors_{which}.weight")
        return None

    # ---- metadata -------------------------------------------------------------------------------------------
    def _read_hparams(self) -> HParams:
        r = self.reader
        arch = _field(r, "general.architecture")
        if arch not in ("llama", "gemma3", "qwen2", "qwen3", "phi3", "qwen2moe", "qwen3moe"):
            raise ValueError(f"{self.path}: architecture {arch!r} is not supported by the reference "
                             "(supported: llama, gemma3, qwen2, qwen3, phi3, qwen2moe, qwen3moe)")

        def key(name, default=None, required=False):
            v = _field(r, f"{arch}.{name}", default)
            if v is None and required:
                raise ValueError(f"{self.path}: missing metadata key {arch}.{name}")
            return v

        n_embd = int(key("embedding_length", required=True))
        n_layer = int(key("block_count", required=True))
        n_head = int(key("attention.head_count", required=True))
        n_head_kv = int(key("attention.head_count_kv", n_head))
        head_dim_k = int(key("attention.key_length", n_embd // n_head))
        head_dim_v = int(key("attention.value_length", n_embd // n_head))
        n_rot = int(key("rope.dimension_count", head_dim_k))
        emb = self.tensors.get("token_embd.weight")
        if emb is None:
            raise ValueError(f"{self.path}: missing tensor token_embd.weight")
        n_vocab = int(emb.shape[1])

        scaling = key("rope.scaling.type", "linear")
        freq_scale = 1.0
        if scaling in ("linear", "longrope"):
            factor = float(key("rope.scaling.factor", 0.0) or 0.0)
            freq_scale = 1.0 / factor if factor > 0 else 1.0
        elif scaling != "none":
            raise ValueError(f"{self.path}: rope scaling {scaling!r} is not supported by the reference")
        n_ctx_train = int(key("context_length", 2048))

        rope_base = float(key("rope.freq_base", 10000.0))
        sliding_window = 0
        is_swa = [False] * n_layer
        rope_base_swa = rope_base
        softcap = float(key("final_logit_softcapping", 0.0) or 0.0)
        if arch == "llama":
            rope_neox = False
            attn_scale = float(key("attention.scale", 0.0) or 0.0) or 1.0 / math.sqrt(head_dim_k)
        elif arch in ("qwen2", "qwen3", "phi3", "qwen2moe", "qwen3moe"):
            rope_neox = True
            attn_scale = 1.0 / math.sqrt(head_dim_k)
            if arch == "phi3":  # every layer within the window, where the file sets one
                sliding_window = int(key("attention.sliding_window", 0) or 0)
                is_swa = [sliding_window > 0] * n_layer
        else:  # gemma3
            rope_neox = True
            sliding_window = int(key("attention.sliding_window", 0) or 0)
            if sliding_window > 0:
                pattern = key("attention.sliding_window_pattern", 6)
                if isinstance(pattern, list):           # explicit per-layer flags
                    is_swa = [bool(p) for p in pattern][:n_layer]
                else:
                    p = int(pattern)
                    is_swa = [p == 0 or (il % p < p - 1) for il in range(n_layer)]
                rope_base_swa = float(key("rope.freq_base_swa", 10000.0))
            # gemma_pytorch's query_pre_attn_scalar: head_dim, except the 27B model (62 layers) which uses
            # n_embd / n_head.
            if n_layer == 62:
                attn_scale = 1.0 / math.sqrt(n_embd / n_head)
            else:
                attn_scale = 1.0 / math.sqrt(head_dim_k)

        n_expert = int(key("expert_count", 0) or 0)
        n_expert_used = int(key("expert_used_count", 0) or 0)
        n_ff = int(key("feed_forward_length", 0) or 0)
        if n_expert == 0 and n_ff == 0:
            raise ValueError(f"{self.path}: missing metadata key {arch}.feed_forward_length")
        n_ff_exp = n_ff if arch == "llama" else int(key("expert_feed_forward_length", 0) or 0) or (
            n_ff // max(n_expert_used, 1))
        n_ff_shexp = int(key("expert_shared_feed_forward_length", 0) or 0) or n_ff if arch == "qwen2moe" else 0
        scale = float(key("expert_weights_scale", 0.0) or 0.0)
        return HParams(
            arch=arch, n_vocab=n_vocab, n_embd=n_embd, n_layer=n_layer,
            n_ff=n_ff,
            n_head=n_head, n_head_kv=n_head_kv, head_dim_k=head_dim_k, head_dim_v=head_dim_v, n_rot=n_rot,
            rope_base=rope_base, rope_base_swa=rope_base_swa, rope_freq_scale=freq_scale, rope_neox=rope_neox,
            eps=float(key("attention.layer_norm_rms_epsilon", required=True)),
            attn_scale=attn_scale, sliding_window=sliding_window, is_swa=is_swa,
            final_logit_softcap=softcap,
            rope_attn_factor=float(key("rope.scaling.attn_factor", 1.0)),
            n_ctx_orig=int(key("rope.scaling.original_context_length", 0) or 0) or n_ctx_train,
            n_ctx_train=n_ctx_train,
            n_expert=n_expert, n_expert_used=n_expert_used, n_ff_exp=n_ff_exp, n_ff_shexp=n_ff_shexp,
            gating=int(key("expert_gating_func", 1)),
            norm_w=bool(key("expert_weights_norm", arch != "qwen2moe")),
            w_scale=scale if scale != 0.0 else 1.0)

    # ---- weights --------------------------------------------------------------------------------------------
    def has(self, name: str) -> bool:
        return name in self.tensors

    def _dequant(self, t, rows=None) -> np.ndarray:
        """Dequantize tensor t (optionally only the given rows) to float32, numpy shape [rows, cols]."""
        data = t.data if rows is None else t.data[rows]
        w = dequantize(data, t.tensor_type)
        n_cols = int(t.shape[0])
        return np.asarray(w, dtype=np.float32).reshape(-1, n_cols)

    def weight(self, name: str) -> np.ndarray:
        """The whole tensor as float64; [out, in] for matrices, [n] for vectors. Cached (as float32)."""
        w = self._cache.get(name)
        if w is None:
            t = self.tensors.get(name)
            if t is None:
                raise KeyError(f"{self.path}: missing tensor {name}")
            w = self._dequant(t)
            if len(t.shape) == 1:
                w = w.reshape(-1)
            self._cache[name] = w
        return w.astype(np.float64)

    def opt(self, name: str):
        return self.weight(name) if self.has(name) else None

    def experts(self, name: str) -> np.ndarray:
        """A 3-D expert tensor as float64 [n_expert, n_out, n_in] (cached as float32)."""
        w = self._cache.get(name)
        if w is None:
            t = self.tensors.get(name)
            if t is None:
                raise KeyError(f"{self.path}: missing tensor {name}")
            n_in, n_out, n_exp = (int(d) for d in t.shape)
            w = self._dequant(t).reshape(n_exp, n_out, n_in)
            self._cache[name] = w
        return w.astype(np.float64)

    def embed_rows(self, tokens) -> np.ndarray:
        t = self.tensors["token_embd.weight"]
        ids = np.asarray(tokens, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.hp.n_vocab):
            raise ValueError(f"token id out of range [0, {self.hp.n_vocab})")
        return self._dequant(t, ids).astype(np.float64)

    def output_projection(self, h: np.ndarray) -> np.ndarray:
        """h [n, n_embd] float64 -> logits [n, n_vocab] float64, vocabulary processed in chunks."""
        t = self.tensors.get("output.weight")
        if t is None:  # tied output
            t = self.tensors["token_embd.weight"]
        n_vocab = int(t.shape[1])
        out = np.empty((h.shape[0], n_vocab), dtype=np.float64)
        for r0 in range(0, n_vocab, OUTPUT_CHUNK_ROWS):
            r1 = min(n_vocab, r0 + OUTPUT_CHUNK_ROWS)
            w = self._dequant(t, slice(r0, r1)).astype(np.float64)
            out[:, r0:r1] = h @ w.T
        return out


# ---- ops (float64) ------------------------------------------------------------------------------------------
def rms_norm(x: np.ndarray, w: np.ndarray | None, eps: float) -> np.ndarray:
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * w if w is not None else y


def rope(x: np.ndarray, pos: np.ndarray, n_rot: int, base: float, freq_scale: float, neox: bool,
         freq_factors: np.ndarray | None = None, attn_factor: float = 1.0) -> np.ndarray:
    """x [n_tokens, n_heads, head_dim]; rotates pair i of the first n_rot dims of each head by the angle
    pos * freq_scale * base^(-2i/n_rot) / freq_factors[i], with cos and sin multiplied by attn_factor (LongRoPE);
    the dims past n_rot pass through."""
    half = n_rot // 2
    inv_freq = base ** (-np.arange(half, dtype=np.float64) * 2.0 / n_rot)
    if freq_factors is not None:  # llama 3 style per-frequency factors, or LongRoPE's
        inv_freq = inv_freq / freq_factors[:half]
    theta = (pos.astype(np.float64)[:, None] * freq_scale) * inv_freq[None, :]     # [n_tokens, half]
    cos = attn_factor * np.cos(theta)[:, None, :]
    sin = attn_factor * np.sin(theta)[:, None, :]
    y = x.copy()
    if neox:
        x0, x1 = x[..., :half], x[..., half:n_rot]
        y[..., :half] = x0 * cos - x1 * sin
        y[..., half:n_rot] = x0 * sin + x1 * cos
    else:
        x0, x1 = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
        y[..., 0:n_rot:2] = x0 * cos - x1 * sin
        y[..., 1:n_rot:2] = x0 * sin + x1 * cos
    return y


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def attention(q, k, v, scale: float, window: int) -> np.ndarray:
    """q [n, n_head, dk], k [n, n_kv, dk], v [n, n_kv, dv]; causal (+ sliding window when window > 0).
    Returns [n, n_head * dv]."""
    n, n_head, _ = q.shape
    n_kv = k.shape[1]
    group = n_head // n_kv
    pos = np.arange(n)
    masked = pos[None, :] > pos[:, None]                       # key after query
    if window > 0:
        masked |= (pos[:, None] - pos[None, :]) >= window      # key too far in the past
    out = np.empty((n, n_head, v.shape[2]), dtype=np.float64)
    for h in range(n_head):
        kh, vh = k[:, h // group, :], v[:, h // group, :]
        s = (q[:, h, :] * scale) @ kh.T                         # [n_q, n_k]
        s = np.where(masked, -np.inf, s)
        s = s - s.max(axis=1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=1, keepdims=True)
        out[:, h, :] = p @ vh
    return out.reshape(n, -1)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def route(hp: HParams, logits: np.ndarray):
    """The experts each token runs: logits [n, n_expert] -> (ids [n, k] in descending order of probability, the lower
    index first among equal ones; weights [n, k])."""
    if hp.gating == 1:
        z = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs = z / z.sum(axis=1, keepdims=True)
    elif hp.gating == 2:
        probs = sigmoid(logits)
    elif hp.gating == 3:
        probs = logits
    elif hp.gating == 4:
        probs = np.sqrt(np.logaddexp(0.0, logits))
    else:
        raise ValueError(f"expert_gating_func {hp.gating} is not supported by the reference")
    ids = np.argsort(-probs, axis=1, kind="stable")[:, :hp.n_expert_used]
    w = np.take_along_axis(probs, ids, axis=1)
    if hp.gating == 3:
        z = np.exp(w - w.max(axis=1, keepdims=True))
        w = z / z.sum(axis=1, keepdims=True)
    if hp.norm_w:
        w = w / np.maximum(w.sum(axis=1, keepdims=True), 6.103515625e-5)
    return ids, w * hp.w_scale


def moe_ffn(m: Model, il: int, h: np.ndarray, tr) -> np.ndarray:
    """The mixture of experts of block il on h [n, n_embd]; traces the chosen ids as ffn_moe_topk-IL."""
    hp = m.hp
    p = f"blk.{il}."
    logits = h @ m.weight(p + "ffn_gate_inp.weight").T
    ids, w = route(hp, logits)
    tr(f"ffn_moe_topk-{il}", ids)
    gate, up, down = (m.experts(p + f"ffn_{n}_exps.weight") for n in ("gate", "up", "down"))
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        for j, e in enumerate(ids[t]):
            out[t] += w[t, j] * (down[e] @ (silu(gate[e] @ h[t]) * (up[e] @ h[t])))
    if hp.n_ff_shexp > 0:
        sh = linear(m, silu(linear(m, h, p + "ffn_gate_shexp")) * linear(m, h, p + "ffn_up_shexp"),
                    p + "ffn_down_shexp")
        if m.has(p + "ffn_gate_inp_shexp.weight"):
            sh = sh * sigmoid(h @ m.weight(p + "ffn_gate_inp_shexp.weight"))[:, None]
        out = out + sh
    return out


def linear(m: Model, x: np.ndarray, name: str) -> np.ndarray:
    y = x @ m.weight(name + ".weight").T
    b = name + ".bias"
    if m.has(b):
        y = y + m.weight(b)
    return y


# ---- the forward pass ---------------------------------------------------------------------------------------
def embed(m: Model, tokens) -> np.ndarray:
    """Input embeddings [n_tokens, n_embd] (float64), scaled as the architecture wants."""
    if len(tokens) == 0:
        raise ValueError("empty token list")
    x = m.embed_rows(tokens)
    if m.hp.arch == "gemma3":
        x = x * math.sqrt(m.hp.n_embd)
    return x


def block(m: Model, il: int, x: np.ndarray, trace=None, kv_dtype=None) -> np.ndarray:
    """Transformer block il: x [n_tokens, n_embd] (positions 0..n-1) -> the block's output (the residual stream).
    trace, if given, is called as trace(name, array) with intermediate tensors named like llama.cpp's graph
    callbacks (attn_norm-IL, Qcur-IL, kqv_out-IL, ffn_inp-IL, l_out-IL, ...) to locate a divergence.
    kv_dtype (e.g. np.float16), if given, rounds K (after RoPE) and V to that type, as an engine that stores its KV
    cache in it does; the default keeps them float64."""
    tr = trace or (lambda name, a: None)
    hp = m.hp
    n = x.shape[0]
    pos = np.arange(n)
    p = f"blk.{il}."
    h = rms_norm(x, m.weight(p + "attn_norm.weight"), hp.eps)
    tr(f"attn_norm-{il}", h)
    if m.has(p + "attn_qkv.weight"):
        qkv = linear(m, h, p + "attn_qkv")
        nq, nk = hp.n_head * hp.head_dim_k, hp.n_head_kv * hp.head_dim_k
        q = qkv[:, :nq].reshape(n, hp.n_head, hp.head_dim_k)
        k = qkv[:, nq:nq + nk].reshape(n, hp.n_head_kv, hp.head_dim_k)
        v = qkv[:, nq + nk:].reshape(n, hp.n_head_kv, hp.head_dim_v)
    else:
        q = linear(m, h, p + "attn_q").reshape(n, hp.n_head, hp.head_dim_k)
        k = linear(m, h, p + "attn_k").reshape(n, hp.n_head_kv, hp.head_dim_k)
        v = linear(m, h, p + "attn_v").reshape(n, hp.n_head_kv, hp.head_dim_v)
    window = hp.sliding_window if hp.arch == "phi3" and hp.is_swa[il] else 0
    base = hp.rope_base
    if hp.arch in ("gemma3", "qwen3", "qwen3moe"):
        q = rms_norm(q, m.weight(p + "attn_q_norm.weight"), hp.eps)
        k = rms_norm(k, m.weight(p + "attn_k_norm.weight"), hp.eps)
    if hp.arch == "gemma3":
        if hp.is_swa[il]:
            window = hp.sliding_window
            base = hp.rope_base_swa
    # Gemma 3's local layers rotate with a table of their own: their base, no factors.
    own = hp.arch == "gemma3" and hp.is_swa[il]
    ff = None if own else m.rope_factors()
    af = 1.0 if own else hp.rope_attn_factor
    q = rope(q, pos, hp.n_rot, base, hp.rope_freq_scale, hp.rope_neox, ff, af)
    k = rope(k, pos, hp.n_rot, base, hp.rope_freq_scale, hp.rope_neox, ff, af)
    if kv_dtype is not None:
        k = k.astype(kv_dtype).astype(np.float64)
        v = v.astype(kv_dtype).astype(np.float64)
    tr(f"Qcur-{il}", q)
    tr(f"Kcur-{il}", k)
    tr(f"Vcur-{il}", v)
    a = attention(q, k, v, hp.attn_scale, window)
    tr(f"kqv_out-{il}", a)
    a = linear(m, a, p + "attn_output")
    tr(f"attn_out-{il}", a)
    if hp.arch == "gemma3":
        a = rms_norm(a, m.weight(p + "post_attention_norm.weight"), hp.eps)
    x = x + a
    tr(f"ffn_inp-{il}", x)

    h = rms_norm(x, m.weight(p + "ffn_norm.weight"), hp.eps)
    tr(f"ffn_norm-{il}", h)
    if hp.n_expert > 0:
        f = moe_ffn(m, il, h, tr)
    else:
        if hp.arch == "phi3":  # ffn_up holds the gate's rows, then up's
            gate_up = linear(m, h, p + "ffn_up")
            gate, up = gate_up[:, :hp.n_ff], gate_up[:, hp.n_ff:]
        else:
            gate = linear(m, h, p + "ffn_gate")
            up = linear(m, h, p + "ffn_up")
        act = gelu_tanh(gate) if hp.arch == "gemma3" else silu(gate)
        f = linear(m, act * up, p + "ffn_down")
    tr(f"ffn_out-{il}", f)
    if hp.arch == "gemma3":
        f = rms_norm(f, m.weight(p + "post_ffw_norm.weight"), hp.eps)
    x = x + f
    tr(f"l_out-{il}", x)
    return x


def hidden_states(m: Model, tokens, trace=None, kv_dtype=None) -> np.ndarray:
    """Final-norm hidden states [n_tokens, n_embd] (float64) for a sequence starting at position 0."""
    x = embed(m, tokens)
    if trace:
        trace("inp_embd", x)
    for il in range(m.hp.n_layer):
        x = block(m, il, x, trace, kv_dtype)
    return rms_norm(x, m.weight("output_norm.weight"), m.hp.eps)


def logits_from_hidden(m: Model, h: np.ndarray) -> np.ndarray:
    out = m.output_projection(h)
    cap = m.hp.final_logit_softcap
    if cap:
        out = cap * np.tanh(out / cap)
    return out


_MODELS: dict[str, Model] = {}


def load(path: str) -> Model:
    """Open a model once per process (weights stay cached between calls)."""
    m = _MODELS.get(path)
    if m is None:
        m = _MODELS[path] = Model(path)
    return m


def forward(model, tokens, last_only: bool = False, kv_dtype=None) -> np.ndarray:
    """Logits (float64) [n_tokens, n_vocab] of every position, or [1, n_vocab] of the last one if last_only.
    kv_dtype: see block()."""
    m = load(model) if isinstance(model, str) else model
    h = hidden_states(m, list(tokens), kv_dtype=kv_dtype)
    if last_only:
        h = h[-1:]
    return logits_from_hidden(m, h)


def greedy(model, tokens, n_gen: int, eos: int | None = None) -> list[int]:
    """Greedy continuation, recomputing the whole sequence each step (slow; for spot checks only)."""
    m = load(model) if isinstance(model, str) else model
    seq = list(tokens)
    out = []
    for _ in range(n_gen):
        t = int(np.argmax(forward(m, seq, last_only=True)[0]))
        out.append(t)
        seq.append(t)
        if eos is not None and t == eos:
            break
    return out


def perplexity(model, tokens, n_ctx: int, bos: int | None = None, kv_dtype=None):
    """Perplexity by llama.cpp's llama-perplexity recipe, so that the numbers compare: the token stream is cut into
    len(tokens) // n_ctx chunks of n_ctx tokens; each chunk starts from an empty context with its first token
    replaced by bos (when the model adds BOS); only the second half is scored: logits at positions
    n_ctx/2 .. n_ctx-2 predict the next token. Returns (ppl, err, n_scored) with err the same +/- estimate
    (standard error of the mean NLL, times ppl)."""
    m = load(model) if isinstance(model, str) else model
    first = n_ctx // 2
    nll = []
    for c in range(len(tokens) // n_ctx):
        chunk = list(tokens[c * n_ctx:(c + 1) * n_ctx])
        target = chunk[first + 1:]
        if bos is not None:
            chunk[0] = bos
        h = hidden_states(m, chunk, kv_dtype=kv_dtype)[first:n_ctx - 1]
        logits = logits_from_hidden(m, h)
        mx = logits.max(axis=1, keepdims=True)
        logz = (mx + np.log(np.exp(logits - mx).sum(axis=1, keepdims=True)))[:, 0]
        nll.extend(logz - logits[np.arange(len(target)), target])
    if not nll:
        raise ValueError(f"need at least {n_ctx} tokens for one chunk of {n_ctx}")
    nll = np.asarray(nll)
    mean = nll.mean()
    ppl = float(np.exp(mean))
    var = (nll * nll).mean() - mean * mean
    err = float(np.sqrt(var / (len(nll) - 1)) * ppl) if len(nll) > 1 and var > 0 else float("nan")
    return ppl, err, len(nll)


def parse_tokens(s: str) -> list[int]:
    return [int(t) for t in s.replace(" ", "").split(",") if t != ""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="float64 NumPy reference forward pass of a GGUF model")
    ap.add_argument("model")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids, e.g. 1,2,3")
    ap.add_argument("--out", help="write float32 logits [n_tokens, n_vocab] to this .npy file")
    ap.add_argument("--greedy", type=int, default=0, help="print N greedy continuation tokens instead")
    ap.add_argument("--kv-f16", action="store_true", help="round K and V to float16 (an fp16 KV cache)")
    ap.add_argument("--ctx", type=int, default=0,
                    help="context size the run assumes (LongRoPE's choice of factors); default the engine's")
    args = ap.parse_args(argv)
    try:
        m = load(args.model)
        if args.ctx > 0:
            m.n_ctx = args.ctx
        toks = parse_tokens(args.tokens)
        if args.greedy:
            print(",".join(str(t) for t in greedy(m, toks, args.greedy)))
            return 0
        logits = forward(m, toks, kv_dtype=np.float16 if args.kv_f16 else None)
    except (ValueError, KeyError, OSError) as e:
        print(f"forward.py: {e}", file=sys.stderr)
        return 2
    if args.out:
        np.save(args.out, logits.astype(np.float32))
    print(f"{args.model}: {len(toks)} tokens, n_vocab {logits.shape[1]}, "
          f"argmax {[int(i) for i in logits.argmax(axis=1)]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
