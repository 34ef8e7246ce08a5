#!/usr/bin/env python3
"""`tilellm monitor` end to end on a random tiny model (make_tiny_model.py), a few seconds long, with simulated
sensors (a sysfs-like tree this script writes while the run goes on: a CPU thermal zone that is hot, then
cools; a RAPL energy counter; a cpufreq clock) and NVML through the stand-in library of tests/runtime
(fake_nvml.c), so that every telemetry channel and every plot has data:

- the run writes its JSON record, both CSV files and the HTML report; the controller steps up while the zone
  is hot and back down once it cools, each decision with its reading;
- the report is one self-contained file (no script, stylesheet, image or font fetched from anywhere) and every
  plot in it holds data; headless Chromium opens it, lays every plot out with its lines across the time axis
  (measured in the page), and takes a screenshot, kept as BUILD_DIR/monitor_report.png;
- `monitor --from` renders a report from the JSON again; an empty, truncated, foreign or inconsistent sample
  file, or one that is not there, is a one-line error naming the file and the cause, and writes no report;
- --degrade prints its perplexity cost; `bench --pace` puts its pauses inside the timed runs;
- `monitor --serve` samples a running `tilellm serve` (two slots, an API key) while clients send it requests:
  its steps become the record's passes (steps of both slots generating count two tokens), the report renders,
  and a wrong key, an address nothing listens on, a server that generates nothing and pacing options are
  each a one-line error.

    check_monitor.py TILELLM_BINARY FAKE_NVML_LIBRARY BUILD_DIR
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_check import Checks, tiny_model  # noqa: E402
from png_read import read_png  # noqa: E402
from serve_harness import Server  # noqa: E402

PLOTS = ["latency", "throughput", "bandwidth", "level", "clocks", "temperature", "power", "energy", "utilization"]


class SimSensors:
    """A sysfs-like tree whose values a thread changes while the run goes on."""

    def __init__(self, root: str) -> None:
        self.root = root
        for d in ("sys/class/thermal/thermal_zone0", "sys/class/powercap/intel-rapl:0",
                  "sys/devices/system/cpu/cpu0/cpufreq", "sys/devices/system/cpu/cpu1/cpufreq"):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        self.put("sys/class/thermal/thermal_zone0/type", "x86_pkg_temp")
        self.put("sys/class/powercap/intel-rapl:0/name", "package-0")
        self.put("sys/class/powercap/intel-rapl:0/max_energy_range_uj", "262143328850")
        self.temp_c, self.watts, self.energy_uj = 90.0, 35.0, 0.0
        self.stop = False

    def put(self, rel: str, value: str) -> None:
        with open(os.path.join(self.root, rel), "w") as f:
            f.write(value + "\n")

    def run(self, cool_after_s: float) -> None:
        t0 = last = time.monotonic()
        while not self.stop:
            now = time.monotonic()
            self.energy_uj += self.watts * (now - last) * 1e6
            last = now
            hot = now - t0 < cool_after_s
            self.temp_c = 90.0 if hot else 60.0
            self.watts = 35.0 if hot else 20.0
            self.put("sys/class/thermal/thermal_zone0/temp", str(int(self.temp_c * 1000)))
            self.put("sys/class/powercap/intel-rapl:0/energy_uj", str(int(self.energy_uj)))
            for cpu, mhz in (("cpu0", 2400 if hot else 3100), ("cpu1", 2500 if hot else 3000)):
                self.put(f"sys/devices/system/cpu/{cpu}/cpufreq/scaling_cur_freq", str(mhz * 1000))
            time.sleep(0.05)


def png_info(path: str) -> tuple[int, int, float]:
    """Width, height and the share of pixels that are not white, of an 8-bit RGB(A) PNG."""
    w, h, bpp, rows = read_png(path)
    colored = sum(1 for line in rows for x in range(0, w * bpp, bpp)
                  if line[x] < 240 or line[x + 1] < 240 or line[x + 2] < 240)
    return w, h, colored / float(w * h)


# Measured in the page once laid out: per plot, its drawn lines and the extent of their union (px).
MEASURE = """<script>
for (const svg of document.querySelectorAll('svg.plot')) {
  let x0 = Infinity, x1 = -Infinity, n = 0;
  for (const pl of svg.querySelectorAll('polyline')) {
    const b = pl.getBBox();
    if (b.width <= 0) continue;
    n++; x0 = Math.min(x0, b.x); x1 = Math.max(x1, b.x + b.width);
  }
  const r = svg.getBoundingClientRect();
  svg.setAttribute('data-rendered', n + ',' + (n ? (x1 - x0).toFixed(1) : 0) + ',' + r.width.toFixed(0));
}
</script>"""


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def main() -> int:
    binary, fake_nvml, build_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    checks = Checks()
    check = checks.check
    env = dict(os.environ, TILELLM_NVML_LIBRARY=fake_nvml)

    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_model(os.path.join(tmp, "tiny.gguf"))
        sim = SimSensors(os.path.join(tmp, "sensors"))
        out = os.path.join(tmp, "run")

        def tl(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
            return subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout, env=env)

        updater = threading.Thread(target=sim.run, args=(2.0,))
        updater.start()
        try:
            r = tl("monitor", "-m", model, "-t", "2", "--duration", "4", "-p", "8", "-n", "24", "--sample-hz", "20",
                   "--sensors-root", sim.root, "--pace-target", "temp=80,hold=0.25", "--peak-gbs", "10", "-o", out)
        finally:
            sim.stop = True
            updater.join()
        check(r.returncode == 0, f"monitor runs: exit {r.returncode} {r.stderr.strip().splitlines()[-1:]}")
        if r.returncode != 0:
            print(r.stderr)
            return checks.summary()
        for src in ("thermal", "rapl", "cpufreq", "nvml"):
            check(re.search(rf"telemetry: {src}: present", r.stderr) is not None, f"{src} reported present")
        check(re.search(r"telemetry: hwmon temperature: absent \(", r.stderr) is not None,
              "an absent source is reported with why")
        ups = re.findall(r"pace: [\d.]+ s: level \d+ -> \d+ \(.*\): temp 90 °C above its limit 80 °C", r.stderr)
        downs = re.findall(r"pace: [\d.]+ s: level \d+ -> \d+ \(.*\): temp 60 °C below its release 76 °C", r.stderr)
        check(len(ups) >= 2 and len(downs) >= 1, f"decisions logged with their readings: {len(ups)} up, {len(downs)} down")
        check(re.search(r"latency: p50 [\d.]+ ms, p95 [\d.]+ ms, p99 [\d.]+ ms", r.stdout) is not None,
              "the summary prints the percentiles")

        rec = json.load(open(out + ".json"))
        check(rec.get("format") == "tilellm-monitor" and rec.get("version") == 1, "the JSON record names its format")
        decode = [p for p in rec["passes"] if p[4] == 1]
        check(len(decode) > 50 and len(rec["samples"]) > 40, f"{len(decode)} decode steps, {len(rec['samples'])} samples")
        cols = rec["sample_columns"]
        for key in ("cpu_temp_c", "cpu_power_w", "cpu_mhz", "gpu_power_w", "gpu_sm_mhz", "gpu_util_pct"):
            vals = [row[cols.index(key)] for row in rec["samples"] if row[cols.index(key)] is not None]
            check(len(vals) > 20, f"{key}: {len(vals)} values")
        power = [row[cols.index("cpu_power_w")] for row in rec["samples"] if row[cols.index("cpu_power_w")] is not None]
        check(any(abs(p - 35) < 3 for p in power) and any(abs(p - 20) < 3 for p in power),
              "RAPL power follows the simulated counter (35 W, then 20 W)")
        levels = [d["to"] for d in rec["decisions"]]
        check(max(levels, default=0) >= 2 and rec["decisions"][-1]["to"] < max(levels), f"controller levels {levels}")
        csv_s = open(out + ".samples.csv").read().splitlines()
        csv_p = open(out + ".passes.csv").read().splitlines()
        check(csv_s[0].startswith("t_s,cpu_mhz,") and len(csv_s) == len(rec["samples"]) + 1, "samples CSV")
        check(csv_p[0] == "t_s,compute_ms,pause_ms,n_tok,decode,level,threads,masked" and
              len(csv_p) == len(rec["passes"]) + 1, "passes CSV")

        html = open(out + ".html").read()
        fetches = re.findall(r"(?:<script|<link|<img|<iframe|src=|url\(|@import|https?://(?!www\.w3\.org/2000/svg))", html)
        check(not fetches, f"self-contained: nothing to fetch {fetches[:3]}")
        plots = dict(re.findall(r'<svg class="plot" id="(\w+)" data-points="(\d+)"', html))
        for p in PLOTS:
            check(int(plots.get(p, "0")) >= 2, f"plot {p}: {plots.get(p, 'missing')} points")
        check("Not plotted" not in html, "nothing left unplotted with every source present")

        browser = chromium()
        check(browser is not None, "headless Chromium is installed (scripts/setup.sh installs Debian's chromium)")
        if browser:
            probe = os.path.join(tmp, "probe.html")
            open(probe, "w").write(html.replace("</body>", MEASURE + "</body>"))
            flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                     f"--user-data-dir={os.path.join(tmp, 'chromium')}", "--window-size=1000,4200"]
            d = subprocess.run([browser, *flags, "--dump-dom", "file://" + probe], capture_output=True, text=True,
                               timeout=120)
            rendered = dict(re.findall(r'id="(\w+)" data-points="\d+"[^>]*data-rendered="([\d.,]+)"', d.stdout))
            for p in PLOTS:
                n, width, svg_w = (float(x) for x in rendered.get(p, "0,0,0").split(","))
                check(n >= 1 and width >= 300 and svg_w >= 900,
                      f"Chromium lays out plot {p}: {int(n)} lines spanning {width:.0f} px of a {svg_w:.0f} px plot")
            shot = os.path.join(build_dir, "monitor_report.png")
            s = subprocess.run([browser, *flags, f"--screenshot={shot}", "file://" + out + ".html"],
                               capture_output=True, text=True, timeout=120)
            ok = s.returncode == 0 and os.path.exists(shot)
            w, h, ink = png_info(shot) if ok else (0, 0, 0.0)
            check(ok and w == 1000 and h == 4200 and ink > 0.03,
                  f"screenshot {shot}: {w}x{h}, {100 * ink:.1f}% of the pixels drawn")

        # Rendering again from the record, and the files that must be refused.
        again = os.path.join(tmp, "again")
        r = tl("monitor", "--from", out + ".json", "-o", again)
        check(r.returncode == 0 and open(again + ".html").read().count('<svg class="plot"') == len(PLOTS),
              "monitor --from renders the same plots again")
        text = open(out + ".json").read()
        bad = {
            "empty.json": ("", r"empty"),
            "blank.json": ("  \n", r"empty"),
            "truncated.json": (text[: len(text) // 2], r"broken JSON at byte \d+"),
            "foreign.json": ('{"samples": []}', r"not a monitor sample file"),
            "short_row.json": (json.dumps(dict(rec, samples=rec["samples"][:2] + [[1.0, 2.0]])),
                               r"sample row 3 has 2 values"),
            "no_decode.json": (json.dumps(dict(rec, passes=[p for p in rec["passes"] if p[4] == 0])),
                               r"holds no decode steps"),
            "bad_cell.json": (json.dumps(dict(rec, passes=[["x"] * 8])), r"pass row 1 holds a value that is not a number"),
        }
        for name, (content, pattern) in bad.items():
            path = os.path.join(tmp, name)
            open(path, "w").write(content)
            target = os.path.join(tmp, "refused-" + name)
            r = tl("monitor", "--from", path, "-o", target)
            lines = [l for l in r.stderr.strip().splitlines() if l]
            good = (r.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: " + path) and
                    re.search(pattern, lines[0]) is not None and not os.path.exists(target + ".html"))
            check(good, f"{name}: exit {r.returncode}, '{lines[-1] if lines else ''}'")
        r = tl("monitor", "--from", os.path.join(tmp, "missing.json"), "-o", os.path.join(tmp, "x"))
        check(r.returncode == 1 and "cannot open the sample file" in r.stderr, "a missing sample file is named")
        r = tl("monitor", "-m", model, "--duration", "1", "--pace-target", "temp=80", "--sensors-root",
               os.path.join(tmp, "nowhere"), "--peak-gbs", "5", "-o", os.path.join(tmp, "y"))
        check(r.returncode == 1 and "no temperature source" in r.stderr, "a limit nothing can read is refused")

        # --degrade: the cost, measured on a text of the tiny vocabulary and printed.
        text_file = os.path.join(tmp, "text.txt")
        open(text_file, "w").write("".join(chr(33 + (i * 7 + i // 5) % 60) for i in range(1200)))
        r = tl("monitor", "-m", model, "-t", "2", "--duration", "1", "--sensors-root", sim.root, "--pace-target",
               "temp=80", "--degrade", "tile-mask=0.3", "--ppl-file", text_file, "--ppl-ctx", "64", "--peak-gbs", "5",
               "-o", os.path.join(tmp, "degraded"))
        m = re.search(r"degrade tile-mask=0.3: perplexity ([\d.]+) unmasked, ([\d.]+) masked \(([+-][\d.]+)%\)", r.stdout)
        check(r.returncode == 0 and m is not None and float(m.group(1)) != float(m.group(2)),
              f"--degrade prints its perplexity cost: {m.group(0) if m else r.stderr.strip()[-200:]}")

        # bench --pace: four 3 ms pauses per run of 16 decode steps fall inside the timed runs.
        r = tl("bench", "-m", model, "-t", "1", "-p", "4", "-n", "16", "-r", "2", "--pace", "sleep=3000,every=4",
               "-o", "json")
        rows = json.loads(r.stdout) if r.returncode == 0 else []
        check(len(rows) == 2 and all(x["pace"] == "sleep=3000,every=4" for x in rows) and
              rows[1]["avg_ns"] >= 12e6, f"bench --pace: {[(x['pace'], x['avg_ns']) for x in rows]}")
        r = tl("bench", "-m", model, "-t", "1", "-p", "4", "-n", "4", "-r", "1", "-o", "json")
        check(r.returncode == 0 and json.loads(r.stdout)[0]["pace"] == "off", "an unpaced bench row says so")

        check_serve(binary, model, sim.root, tmp, tl, check)
    return checks.summary()


def check_serve(binary, model, sensors, tmp, tl, check) -> None:
    """monitor --serve against a running server that two client threads keep busy."""
    with Server(binary, model, ["--parallel", "2", "-t", "1", "--api-key", "k3y"]) as srv:
        stop = threading.Event()

        def client(seed: int) -> None:
            while not stop.is_set():
                srv.request("POST", "/v1/completions",
                            {"prompt": "ab" * 4, "max_tokens": 24, "temperature": 0.5, "seed": seed})
                seed += 2

        r = tl("monitor", "--serve", srv.url, "--api-key", "k3y", "--duration", "1", "--sensors-root", sensors,
               "-o", os.path.join(tmp, "idle"))
        check(r.returncode == 1 and "generated no token" in r.stderr and not os.path.exists(
            os.path.join(tmp, "idle.html")), f"an idle server: {r.stderr.strip().splitlines()[-1:]}")
        clients = [threading.Thread(target=client, args=(i,)) for i in (1, 2)]
        for c in clients:
            c.start()
        out = os.path.join(tmp, "served")
        try:
            r = tl("monitor", "--serve", srv.url, "--api-key", "k3y", "--duration", "3", "--sample-hz", "20",
                   "--sensors-root", sensors, "-o", out)
            bad_key = tl("monitor", "--serve", srv.url, "--api-key", "wrong", "--duration", "1", "-o",
                         os.path.join(tmp, "bad"))
        finally:
            stop.set()
            for c in clients:
                c.join()
        check(r.returncode == 0, f"monitor --serve runs: exit {r.returncode} {r.stderr.strip().splitlines()[-1:]}")
        if r.returncode != 0:
            return
        check(re.search(r"latency: p50 [\d.]+ ms, p95 [\d.]+ ms, p99 [\d.]+ ms", r.stdout) is not None,
              "monitor --serve prints the percentiles")
        rec = json.load(open(out + ".json"))
        decode = [p for p in rec["passes"] if p[4] == 1]
        two = [p for p in decode if p[3] == 2]
        check(len(decode) > 20 and len(two) > 5, f"the server's steps: {len(decode)} decode, {len(two)} of two slots")
        check(rec["run"]["backend"].startswith("serve at http://127.0.0.1:"), f"backend: {rec['run']['backend']}")
        span = max(p[0] for p in rec["passes"]) - min(p[0] for p in rec["passes"])
        check(0.5 < span < 4.0, f"the steps fall inside the 3 s run on this machine's clock: span {span:.2f} s")
        html = open(out + ".html").read()
        plots = dict(re.findall(r'<svg class="plot" id="(\w+)" data-points="(\d+)"', html))
        for p in ("latency", "throughput", "temperature", "power"):
            check(int(plots.get(p, "0")) >= 2, f"--serve plot {p}: {plots.get(p, 'missing')} points")
        lines = [l for l in bad_key.stderr.strip().splitlines() if l.startswith("error")]
        check(bad_key.returncode == 1 and len(lines) == 1 and "refused (401)" in lines[0] and "--api-key" in lines[0],
              f"a wrong key: {lines}")
        r = tl("monitor", "--serve", srv.url, "--api-key", "k3y", "--pace-target", "temp=80", "--duration", "1",
               "-o", os.path.join(tmp, "paced"))
        check(r.returncode == 1 and "paces itself" in r.stderr, f"pacing a server: {r.stderr.strip()[-120:]}")
    r = tl("monitor", "--serve", "http://127.0.0.1:9", "--duration", "1", "-o", os.path.join(tmp, "nobody"))
    check(r.returncode == 1 and "is `tilellm serve` running there?" in r.stderr,
          f"nothing listening: {r.stderr.strip()[-160:]}")


if __name__ == "__main__":
    sys.exit(main())
