#!/usr/bin/env python3
"""`tilellm serve` tried as a new user would, through the official `openai` Python package.

Against a server this script starts (SmolLM2-135M, 2 slots, an API key, small limits):
  - models; chat whole and streamed (the streamed deltas join to the whole reply's text, greedy); the same chat
    again reuses the slot's cached prompt; stop strings cut the text where they begin; max_tokens ends with
    "length"; text completions whole and streamed, and from token ids ([id, ...], [[id, ...]]); usage adds up;
  - embeddings (base64, the client's default, and float) against the NumPy reference: mean of the final
    normed hidden states (tests/reference/forward.py), unit length, cosine > 0.999;
  - errors as OpenAI error objects with the right status, the server still serving after each: malformed
    JSON, wrong types, an out-of-range value, a body over --max-body (413), an unknown model (404), a prompt
    longer than the context (400), token ids outside the vocabulary, empty or not integers (400), max_tokens over --max-tokens (400), a missing or wrong key (401), a full
    queue (503 with Retry-After);
  - a request sent 3.5 s after its connection opened is answered (not closed as an idle keep-alive);
  - a client that disconnects mid-stream frees its slot (tilellm_slots_busy back to 0, cancelled counted);
    so does one that disconnects while its whole (non-streamed) reply is generated (the job cancelled);
  - SIGTERM ends the server with exit status 0.

    check_serve_openai.py TILELLM_BINARY
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import sys
import threading
import time

import numpy as np
import openai

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
from cli_check import Checks  # noqa: E402
from serve_harness import Server  # noqa: E402

MODELS = os.environ.get("TILELLM_MODELS_DIR", os.path.join(ROOT, "models"))
MODEL = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
KEY = "test-key-0123456789"
CTX = 256


def status_of(fn) -> tuple[int, object]:
    """The HTTP status an openai call ends with (200 when it succeeds) and the error body."""
    try:
        fn()
        return 200, None
    except openai.APIStatusError as e:
        return e.status_code, e.body


def is_error_object(body) -> bool:
    # The client hands over the "error" member's content.
    return isinstance(body, dict) and isinstance(body.get("message"), str) and "type" in body


def main() -> int:
    binary = sys.argv[1]
    c = Checks()
    args = ["--parallel", "2", "-c", str(CTX), "--max-queue", "1", "--api-key", KEY, "--max-body", "65536",
            "--max-tokens", "64", "-t", "2"]
    with Server(binary, MODEL, args) as s:
        client = openai.OpenAI(base_url=s.url + "/v1", api_key=KEY, max_retries=0, timeout=120)
        models = client.models.list().data
        model_id = os.path.basename(MODEL)
        c.check(len(models) == 1 and models[0].id == model_id, f"/v1/models lists {model_id}")

        msgs = [{"role": "user", "content": "Name three colours."}]
        greedy = dict(model=model_id, messages=msgs, temperature=0, max_tokens=24)
        r1 = client.chat.completions.create(**greedy)
        text = r1.choices[0].message.content
        u = r1.usage
        c.check(isinstance(text, str) and len(text) > 0, f"chat reply: {text!r}")
        c.check(r1.choices[0].finish_reason in ("stop", "length"), f"finish_reason {r1.choices[0].finish_reason}")
        c.check(u.prompt_tokens > 5 and 0 < u.completion_tokens <= 24 and
                u.total_tokens == u.prompt_tokens + u.completion_tokens, f"usage adds up: {u}")
        r2 = client.chat.completions.create(**greedy)
        c.check(r2.choices[0].message.content == text, "the same greedy chat gives the same text")
        cached = r2.usage.prompt_tokens_details.cached_tokens if r2.usage.prompt_tokens_details else 0
        c.check(cached == u.prompt_tokens - 1, f"the second request reuses the slot's prompt ({cached} cached)")

        chunks = list(client.chat.completions.create(**greedy, stream=True, stream_options={"include_usage": True}))
        streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
        c.check(streamed == text, f"streamed deltas join to the whole reply ({len(chunks)} chunks)")
        c.check(finishes == [r1.choices[0].finish_reason], f"one finish_reason at the end: {finishes}")
        c.check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == u.completion_tokens,
                "include_usage: the last chunk has the usage")
        status, _, raw = s.request("POST", "/v1/chat/completions", {**greedy, "stream": True})
        c.check(status == 200 and raw.rstrip().endswith(b"data: [DONE]"), "the stream ends with data: [DONE]")

        # A stop string from inside the greedy text: the reply ends where it begins.
        words = text.split()
        if len(words) >= 3:
            stop = " " + words[2]
            cut = text.index(stop)
            r = client.chat.completions.create(**greedy, stop=[stop])
            c.check(r.choices[0].message.content == text[:cut] and r.choices[0].finish_reason == "stop",
                    f"stop {stop!r}: {r.choices[0].message.content!r}")
        r = client.chat.completions.create(**{**greedy, "max_tokens": 3})
        c.check(r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length",
                "max_tokens 3: three tokens, finish_reason length")
        r = client.chat.completions.create(model=model_id, messages=msgs, temperature=0.9, seed=7, max_tokens=16,
                                           presence_penalty=0.5, frequency_penalty=0.5, top_p=0.9)
        r_again = client.chat.completions.create(model=model_id, messages=msgs, temperature=0.9, seed=7, max_tokens=16,
                                                 presence_penalty=0.5, frequency_penalty=0.5, top_p=0.9)
        c.check(r.choices[0].message.content == r_again.choices[0].message.content,
                "sampled with a seed and penalties: the same seed gives the same text")

        comp = client.completions.create(model=model_id, prompt="The capital of France is", temperature=0,
                                         max_tokens=8)
        ctext = comp.choices[0].text
        c.check(len(ctext) > 0 and comp.usage.completion_tokens <= 8, f"completion: {ctext!r}")
        cs = "".join(ch.choices[0].text for ch in client.completions.create(
            model=model_id, prompt="The capital of France is", temperature=0, max_tokens=8, stream=True))
        c.check(cs == ctext, "streamed completion equals the whole one")
        # The same prompt as token ids (as llama-server takes them: [id, ...] or [[id, ...]]), used as given.
        _, _, tb = s.request("POST", "/tokenize", {"content": "The capital of France is", "add_special": True})
        prompt_ids = json.loads(tb)["tokens"]
        for form in (prompt_ids, [prompt_ids]):
            by_ids = client.completions.create(model=model_id, prompt=form, temperature=0, max_tokens=8)
            c.check(by_ids.choices[0].text == ctext and by_ids.usage.prompt_tokens == len(prompt_ids),
                    f"a prompt of token ids continues as its text does: {by_ids.choices[0].text!r}")

        # Embeddings against the NumPy reference.
        import forward
        texts = ["The cat sat on the mat.", "Quantum chromodynamics"]
        e64 = client.embeddings.create(model=model_id, input=texts)  # the client asks for base64
        ef = client.embeddings.create(model=model_id, input=texts[0], encoding_format="float")
        v0 = np.array(e64.data[0].embedding)
        c.check(len(e64.data) == 2 and v0.shape == (576,), f"embeddings: 2 vectors of {v0.shape}")
        c.check(abs(np.linalg.norm(v0) - 1) < 1e-5, "embeddings have unit length")
        c.check(np.allclose(np.array(ef.data[0].embedding), v0, atol=1e-6), "float and base64 encodings agree")
        ref_model = forward.Model(MODEL)
        for i, t in enumerate(texts):
            status, _, body = s.request("POST", "/tokenize", {"content": t, "add_special": True})
            ids = json.loads(body)["tokens"]
            ref = forward.hidden_states(ref_model, ids).mean(axis=0)
            ref /= np.linalg.norm(ref)
            cos = float(np.dot(ref, np.array(e64.data[i].embedding)))
            c.check(cos > 0.999, f"embedding {i} against the reference (mean of normed hidden states): cos {cos:.6f}")
        cos01 = float(np.dot(v0, np.array(e64.data[1].embedding)))
        c.check(cos01 < 0.99, f"different texts give different embeddings (cos {cos01:.3f})")

        status, _, body = s.request("POST", "/tokenize", {"content": "Hello world"})
        ids = json.loads(body)["tokens"]
        status2, _, body2 = s.request("POST", "/detokenize", {"tokens": ids})
        c.check(status == 200 and status2 == 200 and json.loads(body2)["content"] == "Hello world",
                f"tokenize/detokenize round trip: {ids}")

        # Errors: status, an error object, and the server still serving.
        def expect(what: str, want: int, status: int, body) -> None:
            if isinstance(body, (bytes, bytearray)):
                try:
                    body = json.loads(body).get("error")
                except ValueError:
                    body = None
            c.check(status == want and is_error_object(body), f"{what}: {status} (want {want}) {body}")
            c.check(s.request("GET", "/health")[0] == 200, f"  ... and the server still answers after {what}")

        st, _, b = s.request("POST", "/v1/chat/completions", raw=b'{"messages": [')
        expect("malformed JSON", 400, st, b)
        expect("messages of the wrong type", 400, *status_of(lambda: client.chat.completions.create(
            model=model_id, messages="hello")))
        st, _, b = s.request("POST", "/v1/chat/completions", {"messages": msgs, "temperature": "hot"})
        expect("temperature as a string", 400, st, b)
        st, _, b = s.request("POST", "/v1/chat/completions", {"messages": msgs, "top_p": 7})
        expect("top_p out of range", 400, st, b)
        st, _, b = s.request("POST", "/v1/completions", raw=json.dumps({"prompt": "x" * 70000}).encode())
        expect("a body over --max-body", 413, st, b)
        expect("an unknown model", 404, *status_of(lambda: client.chat.completions.create(
            model="gpt-imaginary", messages=msgs)))
        expect("a prompt longer than the context", 400, *status_of(lambda: client.completions.create(
            model=model_id, prompt="word " * (CTX + 10))))
        expect("max_tokens over --max-tokens", 400, *status_of(lambda: client.completions.create(
            model=model_id, prompt="Hi", max_tokens=65)))
        st, _, b = s.request("POST", "/v1/completions", {"prompt": [1, 2, 10 ** 7]})
        expect("a token id outside the vocabulary", 400, st, b)
        st, _, b = s.request("POST", "/v1/completions", {"prompt": [[]]})
        expect("an empty token array", 400, st, b)
        st, _, b = s.request("POST", "/v1/completions", {"prompt": [1, "two"]})
        expect("a token array holding a string", 400, st, b)
        st, _, b = s.request("GET", "/v1/models", headers={"Authorization": ""})
        expect("no API key", 401, st, b)
        expect("a wrong API key", 401, *status_of(lambda: openai.OpenAI(
            base_url=s.url + "/v1", api_key="test-key-0123456780", max_retries=0).models.list()))
        c.check(s.request("GET", "/health", headers={"Authorization": ""})[0] == 200, "/health needs no key")

        # A client slow between connect and send (a loaded machine) is still answered: the server's 2 s
        # keep-alive wait must not close a connection whose first request has not yet arrived.
        host, port = s.url.split("//")[1].split(":")
        slow = socket.create_connection((host, int(port)))
        time.sleep(3.5)
        slow.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        slow.settimeout(10)
        reply = b""
        try:
            while chunk := slow.recv(4096):
                reply += chunk
        except OSError as e:
            reply += repr(e).encode()
        slow.close()
        c.check(reply.startswith(b"HTTP/1.1 200"), f"a request sent 3.5 s after connect: {reply[:60]!r}")

        # Disconnect mid-stream: the slot is free again, the cancel counted.
        cancelled0 = s.metric("requests_cancelled_total")
        sock = socket.create_connection((host, int(port)))
        body = json.dumps({"messages": msgs, "stream": True, "max_tokens": 64, "ignore_eos": True}).encode()
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Authorization: Bearer " + KEY.encode() + b"\r\nContent-Length: " +
                     str(len(body)).encode() + b"\r\n\r\n" + body)
        got = b""
        while got.count(b"data: ") < 3:
            got += sock.recv(4096)
        busy = s.metric("slots_busy")
        sock.close()
        t0 = time.time()
        after = s.wait_metric("slots_busy", 0, timeout=10)
        c.check(busy == 1 and after == 0, f"disconnect mid-stream: slots_busy {busy:.0f} -> {after:.0f} "
                                          f"in {time.time() - t0:.2f} s")
        c.check(s.metric("requests_cancelled_total") == cancelled0 + 1, "the cancelled stream is counted")

        # Disconnect while a whole (non-streamed) reply is generated: the client sends its request and closes
        # the connection at once; the job stops long before its 64 tokens (the server looks every 50 ms).
        sock = socket.create_connection((host, int(port)))
        body = json.dumps({"messages": msgs, "max_tokens": 64, "ignore_eos": True}).encode()
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Authorization: Bearer " + KEY.encode() + b"\r\nContent-Length: " +
                     str(len(body)).encode() + b"\r\n\r\n" + body)
        sock.close()
        t0 = time.time()
        while s.metric("requests_cancelled_total") < cancelled0 + 2 and time.time() - t0 < 10:
            time.sleep(0.05)
        # A job ends as cancelled only when told to; one left running would end by its length, uncounted.
        after = s.wait_metric("slots_busy", 0, timeout=10)
        c.check(s.metric("requests_cancelled_total") == cancelled0 + 2 and after == 0,
                f"disconnect before a whole reply: the job cancelled, slots_busy {after:.0f}, "
                f"in {time.time() - t0:.2f} s")

        # A full queue: 2 slots and 1 waiting place, 6 requests at once: some get 503 with Retry-After.
        results = []

        def one() -> None:
            results.append(s.request("POST", "/v1/completions",
                                     {"prompt": "Count:", "max_tokens": 48, "ignore_eos": True}))

        threads = [threading.Thread(target=one) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        codes = sorted(r[0] for r in results)
        full = [r for r in results if r[0] == 503]
        c.check(codes.count(200) >= 3 and len(full) >= 1 and set(codes) <= {200, 503},
                f"a full queue answers 503, the rest 200: {codes}")
        if full:
            c.check(full[0][1].get("Retry-After") == "1" and is_error_object(json.loads(full[0][2])["error"]),
                    "503 carries Retry-After and an error object")
        c.check(s.request("GET", "/health")[0] == 200, "the server still answers after a full queue")
        text_m = s.get("/metrics").decode()
        for name in ("requests_total", "tokens_predicted_total", "prompt_tokens_seconds", "queue_depth",
                     "slots_busy", "kv_cells_used", "requests_rejected_total"):
            c.check(f"tilellm_{name} " in text_m, f"/metrics has tilellm_{name}")
        c.check(s.metric("requests_rejected_total") == len(full), "rejections counted in /metrics")

        # SIGTERM during a stream: the server ends with 0.
        st_thread = threading.Thread(target=lambda: s.request("POST", "/v1/completions", {
            "prompt": "Count:", "max_tokens": 64, "ignore_eos": True, "stream": True}))
        st_thread.start()
        time.sleep(0.5)
        t0 = time.time()
        rc = s.stop()
        st_thread.join(10)
        c.check(rc == 0, f"SIGTERM: exit status {rc} after {time.time() - t0:.2f} s")
    return c.summary()


if __name__ == "__main__":
    sys.exit(main())
