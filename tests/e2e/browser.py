"""A real headless browser for the dashboard's tests: Debian's Chromium driven through the
DevTools protocol over a pipe (--remote-debugging-pipe: JSON messages, NUL-terminated, on file
descriptors 3 and 4), with the standard library only.

    with Browser() as b:
        b.goto("http://127.0.0.1:8080/#/e/0/trials")
        b.wait_for("document.querySelectorAll('#trials tr').length > 1")
        rows = b.eval("document.querySelectorAll('#trials tr').length")
        b.screenshot("/tmp/trials.png")
"""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


class BrowserError(AssertionError):
    pass


class Browser:
    def __init__(self, width=1400, height=1000, timeout=30):
        self.width, self.height, self.timeout = width, height, timeout
        self.next_id = 0
        self.pending_events = []
        self.console = []     # console messages and page errors, for failure reports

    def __enter__(self):
        self.profile = tempfile.TemporaryDirectory(prefix="tp-chromium-")
        self.log = open(os.path.join(self.profile.name, "stderr.log"), "w+")
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        os.set_inheritable(to_chrome_r, True)
        os.set_inheritable(from_chrome_w, True)

        # Its fd 3 reads our commands and its fd 4 writes its answers: bash moves the
        # pipe ends there just before it becomes Chromium.
        args = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
                "--remote-debugging-pipe", "--user-data-dir=" + self.profile.name,
                "--window-size=%d,%d" % (self.width, self.height), "about:blank"]
        self.proc = subprocess.Popen(
            ["/bin/bash", "-c", 'exec "$@" 3<&%d 4>&%d' % (to_chrome_r, from_chrome_w), "bash"]
            + args, pass_fds=(to_chrome_r, from_chrome_w), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=self.log)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.w = os.fdopen(to_chrome_w, "wb", buffering=0)
        self.r = os.fdopen(from_chrome_r, "rb", buffering=0)
        self.buf = b""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=self.width,
                  height=self.height, deviceScaleFactor=1, mobile=False)
        return self

    def __exit__(self, *exc):
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.w.close()
        self.r.close()
        self.log.close()
        self.profile.cleanup()

    # -- the protocol ------------------------------------------------------------------

    def _read_message(self):
        while b"\0" not in self.buf:
            chunk = self.r.read(65536)
            if not chunk:
                self._died()
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def _died(self):
        self.log.seek(0)
        tail = [l for l in self.log.read().splitlines() if "dbus" not in l][-15:]
        raise BrowserError("chromium closed the DevTools pipe (exit %s); its stderr ends:\n%s"
                           % (self.proc.poll(), "\n".join(tail)))

    def call(self, method, session=False, **params):
        self.next_id += 1
        mid = self.next_id
        msg = {"id": mid, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        try:
            self.w.write(json.dumps(msg).encode() + b"\0")
        except BrokenPipeError:
            self._died()
        while True:
            m = self._read_message()
            if m.get("id") == mid:
                if "error" in m:
                    raise BrowserError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self._note(m)

    def _note(self, m):
        method = m.get("method", "")
        if method == "Runtime.consoleAPICalled":
            self.console.append(" ".join(str(a.get("value", a.get("description", "")))
                                         for a in m["params"].get("args", [])))
        elif method == "Runtime.exceptionThrown":
            self.console.append("exception: " + json.dumps(m["params"]["exceptionDetails"])[:500])
        self.pending_events.append(m)

    # -- what the tests use ------------------------------------------------------------

    def goto(self, url):
        self.pending_events = []
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("document.readyState === 'complete'")

    def eval(self, expression):
        r = self.call("Runtime.evaluate", session=True, expression=expression,
                      returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise BrowserError("%s: %s" % (expression, r["exceptionDetails"]))
        return r["result"].get("value")

    def wait_for(self, expression, timeout=None):
        """Poll a JavaScript condition until it is true; raise with the console on timeout."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            try:
                if self.eval("!!(%s)" % expression):
                    return
            except BrowserError:
                pass
            if time.monotonic() > deadline:
                raise BrowserError("the page never satisfied %s; console: %s"
                                   % (expression, self.console[-10:]))
            time.sleep(0.1)

    def click(self, selector):
        """Click the middle of the first element the selector finds as a user does: scrolled
        into view, then the mouse pressed and released there (an SVG link too)."""
        box = self.eval("(() => { const e = document.querySelector(%s); if (!e) return null; "
                        "e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect(); "
                        "return [r.x + r.width / 2, r.y + r.height / 2]; })()"
                        % json.dumps(selector))
        if box is None:
            raise BrowserError("nothing to click: %s" % selector)
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", session=True, type=kind, x=box[0], y=box[1],
                      button="left", clickCount=1)

    def box(self, selector):
        """The first element the selector finds, scrolled into view: its [left, top, width,
        height] on the screen (viewport pixels, where the mouse is pressed)."""
        box = self.eval("(() => { const e = document.querySelector(%s); if (!e) return null; "
                        "e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect(); "
                        "return [r.left, r.top, r.width, r.height]; })()" % json.dumps(selector))
        if box is None:
            raise BrowserError("no such element: %s" % selector)
        return box

    def drag(self, x0, y0, x1, y1, steps=6):
        """Drag with the mouse as a user does: moved to (x0, y0), the left button pressed, moved
        in steps to (x1, y1) with it held, released there."""
        self.call("Input.dispatchMouseEvent", session=True, type="mouseMoved", x=x0, y=y0)
        self.call("Input.dispatchMouseEvent", session=True, type="mousePressed", x=x0, y=y0,
                  button="left", buttons=1, clickCount=1)
        for i in range(1, steps + 1):
            x, y = x0 + (x1 - x0) * i / steps, y0 + (y1 - y0) * i / steps
            self.call("Input.dispatchMouseEvent", session=True, type="mouseMoved", x=x, y=y,
                      button="left", buttons=1)
        self.call("Input.dispatchMouseEvent", session=True, type="mouseReleased", x=x1, y=y1,
                  button="left", buttons=0, clickCount=1)

    def click_at(self, x, y):
        """A click of the left button at (x, y), viewport pixels."""
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", session=True, type=kind, x=x, y=y,
                      button="left", clickCount=1)

    def screenshot(self, path, full_page=True):
        params = {"format": "png"}
        if full_page:
            size = self.eval("[document.documentElement.scrollWidth, "
                             "document.documentElement.scrollHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": max(size[0], self.width),
                              "height": min(max(size[1], self.height), 6000), "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", session=True, **params)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path
