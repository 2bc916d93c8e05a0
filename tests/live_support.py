"""What the tests that run a real server or a real browser share (tests/viz, tests/lm).

`serve(checkpoint, tmp_path_factory)` runs `clearformer serve` as a process on a free loopback port
and yields its URL; `chromium()` yields Debian's chromium driven by Playwright, and skips (or, with CI
set, fails) when it is missing.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CLEARFORMER_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
SERVER_START_SECONDS = 90


def require_browser() -> None:
    missing = []
    if not Path(CHROMIUM).exists():
        missing.append(f"Debian's chromium package ({CHROMIUM})")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the playwright Python package")
    if missing:
        reason = f"browser tests need {' and '.join(missing)}: run scripts/install-browser.sh"
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"{reason} (CI is set, so a missing browser is a failure)")
        pytest.skip(reason)


def chromium():
    """Headless chromium for a module's tests (a generator for a fixture to `yield from`)."""
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # /dev/shm is tiny in containers; chromium then crashes rendering larger pages without this flag.
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--disable-dev-shm-usage"])
        yield browser
        browser.close()


def browser_tab(browser, allowed_error: str | None = None):
    """A fresh tab (a generator for a fixture to `yield from`); afterwards, any page error or console error
    (except those starting with `allowed_error`) fails the test."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(20_000)
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.on("console", lambda message: errors.append(message.text) if message.type == "error" and not (
        allowed_error and message.text.startswith(allowed_error)) else None)
    yield tab
    context.close()
    assert errors == [], f"the page logged errors: {errors}"


# How long a test waits for the page to show something (a server's answer on a loaded 2-core machine
# included) before it fails, naming what it waited for and what the page showed instead.
WAIT_SECONDS = 30


def page_state(tab) -> str:
    """What the page shows now, for a failed wait's message: its status line and its title."""
    try:
        return tab.evaluate("""() => {
            const text = (selector) => { const e = document.querySelector(selector);
                                         return e ? JSON.stringify(e.textContent.trim().slice(0, 200)) : 'none'; };
            return `the page shows status ${text('#cf-status')}, title ${text('#cf-summary h1')}`; }""")
    except Exception as error:  # noqa: BLE001 - a crashed or closed page: say so instead
        return f"the page could not be read ({str(error).splitlines()[0]})"


def wait_for(tab, selector: str, what: str, state: str = "visible", seconds: float = WAIT_SECONDS) -> None:
    """Wait until `selector` is in `state` ("visible", "attached", "detached", ...); else fail in one line
    naming `what` was awaited, for how long, and what the page showed instead."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        tab.wait_for_selector(selector, state=state, timeout=seconds * 1000)
    except PlaywrightTimeout:
        pytest.fail(f"waited {seconds:g} s for {what} ({selector}: {state}); {page_state(tab)}", pytrace=False)


def wait_until(tab, what: str, condition: str, seconds: float = WAIT_SECONDS) -> None:
    """Wait until the JavaScript expression `condition` is true in the page; else fail in one line naming
    `what` was awaited, for how long, and what the page showed instead."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        tab.wait_for_function(condition, timeout=seconds * 1000)
    except PlaywrightTimeout:
        pytest.fail(f"waited {seconds:g} s for {what} ({condition}); {page_state(tab)}", pytrace=False)


def assert_bars_show(tab, probabilities, tokenizer, chosen: str) -> None:
    """The page's bar chart holds the 10 most probable tokens of `probabilities` (vocab,), exactly, and marks
    `chosen` as the token taken."""
    import numpy as np
    import torch

    top = torch.topk(probabilities, 10)
    bars = tab.eval_on_selector_all("#cf-matrices .cf-bar-row", "rows => rows.map(r => [r.dataset.label, "
                                    "+r.dataset.value, r.classList.contains('cf-chosen')])")
    assert [b[0] for b in bars] == [tokenizer.id_to_token(i) for i in top.indices.tolist()]
    # float32's rounding, not exactness: the server decodes with the layout every command loads (generate/layout.py,
    # W x^T laid out for few rows), a test's own forward with nn.Linear's; the same sums in another order.
    np.testing.assert_allclose([b[1] for b in bars], top.values.double().numpy(), rtol=1e-5, atol=1e-9)
    assert [b[0] for b in bars if b[2]] == [chosen]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve(checkpoint: Path, tmp_path_factory):
    """Run `clearformer serve --checkpoint CHECKPOINT` on a free loopback port; yield its URL, then stop it."""
    import httpx

    port = free_port()
    runs = tmp_path_factory.mktemp("runs")
    env = dict(os.environ, CLEARFORMER_RUNS=str(runs))
    log = tmp_path_factory.mktemp("server") / "serve.log"
    with open(log, "wb") as output:
        process = subprocess.Popen([sys.executable, "-m", "clearformer.cli", "serve", "--checkpoint",
                                    str(checkpoint), "--port", str(port)], stdout=output,
                                   stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + SERVER_START_SECONDS
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"clearformer serve exited with {process.returncode}: {log.read_text()}")
            try:
                if httpx.get(url + "api/info", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"clearformer serve silent for {SERVER_START_SECONDS} s: {log.read_text()}")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
