#!/usr/bin/env python3
"""serve's chat page in a real browser: Debian's chromium and chromium-driver, headless, driven by selenium.

The page loads from the server (with an API key, which the page asks for), names the model, a message is
sent, the reply streams in (its text grows while the Stop button is enabled), the speed line appears, and
the reply's text is the one the API gives for the same greedy request. A second message is stopped with the
Stop button: the page says so and the server's slot is free again. The screenshot is kept as
BUILD_DIR/serve_page.png and checked: the reply's region holds more than the background colour.

    check_serve_page.py TILELLM_BINARY BUILD_DIR
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from cli_check import Checks  # noqa: E402
from png_read import read_png  # noqa: E402
from serve_harness import Server  # noqa: E402

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

MODELS = os.environ.get("TILELLM_MODELS_DIR", os.path.join(ROOT, "models"))
MODEL = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
KEY = "page-key"


def png_region_colours(path: str, box: tuple[int, int, int, int]) -> int:
    """Distinct colours inside box (x, y, w, h) of a PNG."""
    width, height, bpp, rows = read_png(path)
    x, y, w, h = box
    colours = set()
    for yy in range(max(0, y), min(height, y + h)):
        for xx in range(max(0, x), min(width, x + w)):
            colours.add(rows[yy][xx * bpp:xx * bpp + 3])
    return len(colours)


def main() -> int:
    binary, build_dir = sys.argv[1], sys.argv[2]
    c = Checks()
    shot = os.path.join(build_dir, "serve_page.png")
    with Server(binary, MODEL, ["--parallel", "1", "-c", "512", "--api-key", KEY, "-t", "2"]) as s, \
            tempfile.TemporaryDirectory() as tmp:
        opts = webdriver.ChromeOptions()
        opts.binary_location = "/usr/bin/chromium"
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1000,800",
                     f"--user-data-dir={tmp}"):
            opts.add_argument(flag)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        try:
            driver.get(s.url + "/")
            c.check(driver.title == "TileLLM chat", f"the page loads: title {driver.title!r}")
            driver.find_element(By.ID, "key").send_keys(KEY)
            WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "model").text != "")
            driver.find_element(By.ID, "temp").clear()
            driver.find_element(By.ID, "temp").send_keys("0")
            driver.find_element(By.ID, "maxtok").clear()
            driver.find_element(By.ID, "maxtok").send_keys("40")
            message = "Write one sentence about the sea."
            driver.find_element(By.ID, "input").send_keys(message)
            driver.find_element(By.ID, "send").click()
            # Streaming: the reply's text is seen growing before it is finished.
            lengths = []
            deadline = time.time() + 60
            while time.time() < deadline:
                els = driver.find_elements(By.CSS_SELECTOR, ".msg.assistant")
                if els:
                    lengths.append(len(els[-1].find_element(By.CLASS_NAME, "content").text))
                    if "finished" in els[-1].get_attribute("class"):
                        break
                time.sleep(0.01)
            reply_el = driver.find_elements(By.CSS_SELECTOR, ".msg.assistant")[-1]
            reply = reply_el.find_element(By.CLASS_NAME, "content").text
            partial = sorted(set(n for n in lengths if 0 < n < len(reply)))
            c.check(len(reply) > 0, f"a reply appears: {reply!r}")
            c.check(len(partial) >= 2, f"it streams in: {len(partial)} partial lengths seen before the end")
            status = driver.find_element(By.ID, "status").text
            c.check("tokens/s" in status, f"the speed is shown: {status!r}")
            c.check(driver.find_element(By.ID, "model").text == os.path.basename(MODEL), "the page names the model")
            st, _, body = s.request("POST", "/v1/chat/completions", {
                "messages": [{"role": "user", "content": message}], "temperature": 0, "max_tokens": 40})
            api = json.loads(body)["choices"][0]["message"]["content"]
            c.check(reply.strip() == api.strip(), "the page's reply is the API's for the same greedy request")
            driver.save_screenshot(shot)
            r = reply_el.rect
            scale = driver.execute_script("return window.devicePixelRatio") or 1
            box = (int(r["x"] * scale), int(r["y"] * scale), int(r["width"] * scale), int(r["height"] * scale))
            n = png_region_colours(shot, box)
            c.check(os.path.getsize(shot) > 0 and n > 8,
                    f"screenshot {shot}: the reply's region {box} holds {n} colours (text drawn)")

            # Stop: a long reply stopped by the button; the page says so and the slot is free. A new chat and
            # greedy sampling, so that the reply is one known not to end before 400 tokens (a sampled one
            # sometimes ended on its own, after 64-75 tokens, before the click reached the server); the page is
            # polled often, so that the click comes a few tokens into the reply.
            driver.find_element(By.ID, "clear").click()
            driver.find_element(By.ID, "maxtok").clear()
            driver.find_element(By.ID, "maxtok").send_keys("400")
            driver.find_element(By.ID, "temp").clear()
            driver.find_element(By.ID, "temp").send_keys("0")
            driver.find_element(By.ID, "input").send_keys("Tell me a very long story about a dragon.")
            driver.find_element(By.ID, "send").click()
            WebDriverWait(driver, 60, poll_frequency=0.02).until(
                lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg.assistant")[-1].text) > 40)
            driver.find_element(By.ID, "stop").click()
            WebDriverWait(driver, 10).until(lambda d: "stopped" in d.find_element(By.ID, "status").text)
            c.check(True, "the Stop button stops the reply: " + driver.find_element(By.ID, "status").text)
            c.check(s.wait_metric("slots_busy", 0, timeout=10) == 0, "the stopped reply's slot is free again")
        finally:
            driver.quit()
        c.check(s.stop() == 0, "the server ends with 0 on SIGTERM")
    return c.summary()


if __name__ == "__main__":
    sys.exit(main())
