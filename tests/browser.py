"""A real headless browser for the HTML report's tests: Debian's Chromium, driven over the Chrome
DevTools protocol (a websocket on the loopback address, websocket-client as the client).

`Browser()` starts Chromium with a new profile and no network but the file it is given, opens one
page, and offers what the tests need: load a file, run JavaScript, click and type as a user does
(real input events at the element's place on the screen), take a screenshot. `find()` says where
Chromium is, or why there is none.
"""
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--mute-audio", "--hide-scrollbars"]
START_SECONDS = 60
STEP_SECONDS = 30


def find():
    """(path to a Chromium, None) or (None, why not)."""
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path, None
    return None, ("no Chromium on this machine: `apt-get install chromium` (Debian's package; .ci/run installs it "
                  "when it can)")


class BrowserError(RuntimeError):
    pass


class Browser:
    def __init__(self, width=1400, height=1000):
        import websocket  # websocket-client, a test dependency

        path, why = find()
        if path is None:
            raise BrowserError(why)
        self.profile = tempfile.mkdtemp(prefix="protoaudit-chromium-")
        self.process = subprocess.Popen(
            [path, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-address=127.0.0.1",
             "--remote-debugging-port=0", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port = self._port()
            with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank",
                                                               method="PUT"), timeout=STEP_SECONDS) as r:
                target = json.load(r)
            self.ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=STEP_SECONDS,
                                                  suppress_origin=True)
        except Exception:
            self.close()
            raise
        self.next_id = 0
        self.events = []
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def _port(self):
        """Chromium writes the port it chose into DevToolsActivePort in its profile."""
        marker = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrowserError(f"Chromium exited at start (status {self.process.returncode})")
            try:
                with open(marker, encoding="ascii") as f:
                    first = f.readline().strip()
                if first:
                    return int(first)
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        raise BrowserError(f"Chromium did not open its DevTools port in {START_SECONDS} s")

    def send(self, method, **params):
        """Call one DevTools method and return its result (events that arrive meanwhile are kept)."""
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == mine:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_for(self, method, seconds=STEP_SECONDS):
        """The first event named `method` not yet seen (waiting for it up to `seconds`)."""
        deadline = time.monotonic() + seconds
        while True:
            for i, event in enumerate(self.events):
                if event["method"] == method:
                    return self.events.pop(i)
            if time.monotonic() > deadline:
                raise BrowserError(f"no {method} in {seconds} s")
            message = json.loads(self.ws.recv())
            if "method" in message:
                self.events.append(message)

    def load(self, path, javascript=True):
        """Open a local file and wait until it has loaded (with its scripts run, unless `javascript` is off)."""
        self.events.clear()
        self.send("Emulation.setScriptExecutionDisabled", value=not javascript)
        self.send("Page.navigate", url="file://" + os.path.abspath(path))
        self.wait_for("Page.loadEventFired")

    def js(self, expression):
        """The value of a JavaScript expression in the page."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def centre(self, selector):
        """Scroll the first element that matches into view; its centre on the screen."""
        box = self.js(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            e.scrollIntoView({{block: "center", inline: "center"}});
            const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
        if box is None:
            raise BrowserError(f"nothing matches {selector}")
        return box

    def click(self, selector):
        """A left click at the element's centre, as a mouse makes it."""
        x, y = self.centre(selector)
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def type(self, selector, text):
        """Click into a field and type `text` into it."""
        self.click(selector)
        self.send("Input.insertText", text=text)

    def screenshot(self, full_page=True):
        """The page as PNG bytes (the whole page, or what the window shows)."""
        params = {"format": "png", "captureBeyondViewport": full_page}
        if full_page:
            width, height = self.js("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        return base64.b64decode(self.send("Page.captureScreenshot", **params)["data"])

    def close(self):
        try:
            if getattr(self, "ws", None) is not None:
                self.ws.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            shutil.rmtree(self.profile, ignore_errors=True)
