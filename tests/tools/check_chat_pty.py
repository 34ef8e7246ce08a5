#!/usr/bin/env python3
"""`tilellm chat` driven as a person drives it, through a pseudo-terminal (SmolLM2, greedy): a message and
its reply; the up arrow recalls the message (libedit's history) and Enter sends it again; Ctrl-C stops a
long reply at once and the chat goes on; /save FILE, /clear, /load FILE: after /load only the new turn is
evaluated (the KV cache came back from the file), and a broken file is an error line, not the end; Ctrl-C at
the prompt ends the chat (exit 0). A second run: a second Ctrl-C right after the first ends the chat; a third:
Ctrl-D.

    check_chat_pty.py TILELLM_BINARY
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import sys
import tempfile
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_check import ROOT, Checks  # noqa: E402

MODELS = os.environ.get("TILELLM_MODELS_DIR", os.path.join(ROOT, "models"))
SMOL = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
LONG = "Write a very long story about a dragon who learns to paint, with many chapters."


class Terminal:
    """A program on a pseudo-terminal: send keys, wait for text."""

    def __init__(self, argv: list[str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the terminal is its stdin, stdout, stderr
            os.environ["TERM"] = "xterm"
            os.execv(argv[0], argv)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self.out = ""
        self.pos = 0  # where the next wait starts looking
        self.status: int | None = None

    def read(self, timeout: float) -> bool:
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:
            data = b""
        if not data:
            return False
        self.out += data.decode("utf-8", "replace")
        return True

    def wait(self, pattern: str, timeout: float = 120.0) -> re.Match | None:
        """The first match of pattern after the last one waited for, or None after timeout seconds."""
        end = time.time() + timeout
        rx = re.compile(pattern)
        while True:
            m = rx.search(self.out, self.pos)
            if m:
                self.pos = m.end()
                return m
            if time.time() > end or not self.read(min(0.5, max(0.0, end - time.time()))):
                m = rx.search(self.out, self.pos)
                if m:
                    self.pos = m.end()
                return m

    def prompt(self, timeout: float = 120.0) -> bool:
        """Waits for the chat's prompt, then a moment more: libedit sets the terminal up after printing it,
        and a key that comes before that may be lost."""
        found = self.wait(r"> ", timeout) is not None
        time.sleep(0.3)
        return found

    def send(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def exited(self, timeout: float) -> int | None:
        """The exit status once the program ends within timeout seconds, else None."""
        end = time.time() + timeout
        while time.time() < end:
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(st)
                return self.status
            self.read(0.2)
        return None

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
        os.close(self.fd)


STATS = r"\[(\d+) new prompt tokens \| (\d+) tokens, [0-9.]+ t/s( \| stopped by Ctrl-C)?\]"


def main() -> int:
    binary = sys.argv[1]
    checks = Checks()
    check = checks.check
    # Replies of at most 200 tokens: long enough to be stopped, short enough not to stall the test.
    argv = [binary, "chat", "-m", SMOL, "-t", "2", "-c", "2048", "--temp", "0", "-n", "200"]

    with tempfile.TemporaryDirectory() as tmp:
        t = Terminal(argv)
        try:
            check(t.wait(r"chat template: .*\n") is not None and t.prompt(), "the chat starts")
            t.send("What is 2+2?\r")  # a short reply
            first = t.wait(STATS)
            check(first is not None and first.group(3) is None, "a reply to the first message")
            check(t.prompt(), "the prompt again")
            t.send("\x1b[A")  # the up arrow
            check(t.wait(r"What is 2\+2\?") is not None,
                  "the up arrow recalls the message (libedit's history)")
            t.send("\r")
            again = t.wait(STATS)
            check(again is not None, "Enter sends the recalled message")

            t.prompt()
            t.send(LONG + "\r")
            t.wait(r"chapters\.\r\n")  # the line as typed, then the reply
            check(t.wait(r"\w+ \w+ \w+ \w+ \w+", 120) is not None, "a long reply starts")
            sent = time.time()
            t.send("\x03")
            stopped = t.wait(STATS, 60)
            took = time.time() - sent
            check(stopped is not None and stopped.group(3) is not None and took < 15,
                  f"Ctrl-C stops the reply ({stopped.group(2) if stopped else '?'} tokens, {took:.1f} s after)")
            check(t.prompt() and t.exited(0.5) is None, "... and the chat goes on")

            saved = os.path.join(tmp, "chat.session")
            t.send(f"/save {saved}\r")
            m = t.wait(r"\[saved (\d+) messages, (\d+) tokens to ")
            check(m is not None and m.group(1) == "6" and os.path.exists(saved),
                  f"/save: {m.group(0) if m else 'nothing'}")
            n_tokens = int(m.group(2)) if m else 0
            t.prompt()
            t.send("/clear\r")
            check(t.wait(r"\[a new conversation\]") is not None, "/clear")
            t.prompt()
            broken = os.path.join(tmp, "broken.session")
            with open(saved, "rb") as f, open(broken, "wb") as g:
                g.write(f.read()[:1000])
            t.send(f"/load {broken}\r")
            check(t.wait(r"error: .*truncated session file") is not None and t.prompt(),
                  "/load of a truncated file: an error line, and the chat goes on")
            t.send(f"/load {saved}\r")
            m = t.wait(r"\[loaded (\d+) messages, (\d+) tokens from ")
            check(m is not None and m.group(1) == "6" and int(m.group(2)) == n_tokens, "/load")
            t.prompt()
            t.send("Say hi.\r")
            after = t.wait(STATS)
            check(after is not None and 0 < int(after.group(1)) < 40 < n_tokens,
                  f"after /load only the new turn is evaluated ({after.group(1) if after else '?'} of "
                  f"{n_tokens}+ tokens)")
            t.prompt()
            t.send("\x03")
            check(t.exited(20) == 0, f"Ctrl-C at the prompt ends the chat (exit {t.status})")
        finally:
            t.close()

        t = Terminal(argv)
        try:
            t.prompt()
            t.send(LONG + "\r")
            t.wait(r"chapters\.\r\n")
            t.wait(r"\w+ \w+ \w+ \w+ \w+", 120)
            t.send("\x03")
            time.sleep(0.1)  # two presses (signals sent at once would merge into one)
            t.send("\x03")
            check(t.exited(20) == 0, f"two Ctrl-C in a row during a reply end the chat (exit {t.status})")
        finally:
            t.close()

        t = Terminal(argv)
        try:
            t.prompt()
            t.send("\x04")
            check(t.exited(20) == 0, f"Ctrl-D ends the chat (exit {t.status})")
        finally:
            t.close()
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
