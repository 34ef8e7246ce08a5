#include "chat_page.h"

namespace tilellm::serve {

const std::string& chat_page_html() {
  static const std::string page = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>TileLLM chat</title>
<style>
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.45 system-ui, sans-serif; background: #f4f5f7; color: #1d1f23;
         display: flex; flex-direction: column; height: 100vh; }
  header { padding: 8px 16px; background: #20242c; color: #fff; display: flex; gap: 16px; align-items: center;
           flex-wrap: wrap; }
  header h1 { font-size: 16px; margin: 0; }
  header label { font-size: 13px; opacity: .9; }
  header input { width: 70px; }
  #key { width: 160px; }
  #log { flex: 1; overflow-y: auto; padding: 16px; }
  .msg { max-width: 760px; margin: 0 auto 12px; padding: 10px 14px; border-radius: 10px; white-space: pre-wrap;
         word-wrap: break-word; }
  .user { background: #dbe7ff; }
  .assistant { background: #fff; border: 1px solid #dde; }
  .error { background: #fde2e2; }
  .role { font-size: 12px; font-weight: 600; opacity: .6; margin-bottom: 2px; }
  form { display: flex; gap: 8px; padding: 12px 16px; background: #fff; border-top: 1px solid #dde; }
  textarea { flex: 1; resize: none; height: 56px; font: inherit; padding: 8px; }
  button { font: inherit; padding: 0 18px; }
  #status { font-size: 13px; padding: 4px 16px; color: #555; min-height: 22px; }
</style>
</head>
<body>
<header>
  <h1>TileLLM chat</h1>
  <span id="model"></span>
  <label>temperature <input id="temp" type="number" step="0.1" min="0" value="0.7"></label>
  <label>max tokens <input id="maxtok" type="number" min="1" value="256"></label>
  <label>API key <input id="key" type="password" placeholder="(none)"></label>
  <button id="clear" type="button">New chat</button>
</header>
<div id="log"></div>
<div id="status"></div>
<form id="form">
  <textarea id="input" placeholder="Type a message; Enter sends, Shift+Enter starts a new line"></textarea>
  <button id="send" type="submit">Send</button>
  <button id="stop" type="button" disabled>Stop</button>
</form>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const log = $("log"), input = $("input"), statusLine = $("status");
let messages = [];
let controller = null;
$("key").value = localStorage.getItem("tilellm_key") || "";
$("key").oninput = () => { localStorage.setItem("tilellm_key", $("key").value); loadModel(); };

function headers() {
  const h = { "Content-Type": "application/json" };
  if ($("key").value) h["Authorization"] = "Bearer " + $("key").value;
  return h;
}

function bubble(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  const r = document.createElement("div");
  r.className = "role";
  r.textContent = role;
  const body = document.createElement("div");
  body.className = "content";
  body.textContent = text;
  div.append(r, body);
  log.append(div);
  log.scrollTop = log.scrollHeight;
  return body;
}

async function loadModel() {
  try {
    const res = await fetch("/v1/models", { headers: headers() });
    const j = await res.json();
    if (res.ok) $("model").textContent = j.data[0].id;
  } catch (e) {}
}

function busy(on) {
  $("send").disabled = on;
  $("stop").disabled = !on;
}

async function send(text) {
  messages.push({ role: "user", content: text });
  bubble("user", text);
  const out = bubble("assistant", "");
  out.parentElement.id = "reply-" + messages.length;
  controller = new AbortController();
  busy(true);
  statusLine.textContent = "waiting for the first token...";
  const t0 = performance.now();
  let reply = "", nChunks = 0, tFirst = 0, timings = null;
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), signal: controller.signal,
      body: JSON.stringify({ messages, stream: true, temperature: Number($("temp").value),
                             max_tokens: Number($("maxtok").value) }),
    });
    if (!res.ok) {
      const j = await res.json().catch(() => ({}));
      throw new Error((j.error && j.error.message) || ("HTTP " + res.status));
    }
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, cut).trim();
        buf = buf.slice(cut + 2);
        if (!ev.startsWith("data:")) continue;
        const data = ev.slice(5).trim();
        if (data === "[DONE]") continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        if (j.timings) timings = j.timings;
        const c = j.choices && j.choices[0];
        if (c && c.delta && c.delta.content) {
          if (!tFirst) tFirst = performance.now();
          reply += c.delta.content;
          nChunks++;
          out.textContent = reply;
          log.scrollTop = log.scrollHeight;
          const s = (performance.now() - tFirst) / 1000;
          statusLine.textContent = nChunks + " tokens" + (s > 0 ? ", " + (nChunks / s).toFixed(1) + " tokens/s" : "");
        }
      }
    }
    let line = "done: ";
    if (timings) {
      line += timings.predicted_n + " tokens, " + timings.predicted_per_second.toFixed(1) + " tokens/s; prompt " +
              timings.prompt_n + " tokens, " + timings.prompt_per_second.toFixed(1) + " tokens/s";
    } else {
      line += nChunks + " tokens in " + ((performance.now() - t0) / 1000).toFixed(2) + " s";
    }
    statusLine.textContent = line;
  } catch (e) {
    if (e.name === "AbortError") {
      statusLine.textContent = "stopped after " + nChunks + " tokens";
    } else {
      out.parentElement.className = "msg error";
      out.textContent = reply + (reply ? "\n" : "") + "error: " + e.message;
      statusLine.textContent = "error";
    }
  }
  out.parentElement.classList.add("finished");
  messages.push({ role: "assistant", content: reply });
  controller = null;
  busy(false);
}

$("form").onsubmit = (e) => {
  e.preventDefault();
  const text = input.value.trim();
  if (!text || controller) return;
  input.value = "";
  send(text);
};
input.onkeydown = (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("form").requestSubmit(); }
};
$("stop").onclick = () => { if (controller) controller.abort(); };
$("clear").onclick = () => { if (!controller) { messages = []; log.textContent = ""; statusLine.textContent = ""; } };
loadModel();
input.focus();
</script>
</body>
</html>
)HTML";
  return page;
}

}  // namespace tilellm::serve
