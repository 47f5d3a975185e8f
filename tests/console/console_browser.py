"""Debian's chromium, headless, driven by Selenium through Debian's chromedriver, and the
console as the `epochlog console` process an operator starts."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from support.broker import epochlog_command, require_binary

# Screenshots are kept here too (gitignored), to look at after a run.
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "console-screenshots"


@contextmanager
def chromium() -> Iterator[webdriver.Chrome]:
    """A headless chromium that records the page's console log (missing packages fail
    the test, never skip it)."""
    options = webdriver.ChromeOptions()
    options.binary_location = require_binary("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument("--window-size=1400,1000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(require_binary("chromedriver", "chromium-driver"))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()


@contextmanager
def console_process(bootstrap: str, out: Path, *flags: str) -> Iterator[str]:
    """`epochlog console` on a free port; yields its URL (the line it prints)."""
    log = out.open("w+")
    proc = subprocess.Popen(
        [*epochlog_command(), "console", "--bootstrap-server", bootstrap, "--port", "0", *flags],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"(http://\S+/)", line)
        assert found, f"console printed {line!r}; its log: {out.read_text()}"
        yield found.group(1)
    finally:
        proc.terminate()
        assert proc.wait(30) == 0, f"console did not stop cleanly: {out.read_text()}"
        log.close()


def wait_for(driver: webdriver.Chrome, what: str, condition: Any, timeout: float = 60) -> Any:
    """Wait for a DOM condition (the page updates itself; it is never reloaded)."""
    return WebDriverWait(driver, timeout, poll_frequency=0.2).until(
        lambda d: condition(d), message=f"the page to show {what}"
    )


# The page re-renders its tables on every update, so an element found in one call may be
# gone in the next: each read is one script, atomic with respect to the page's updates.
def text_of(driver: webdriver.Chrome, css: str) -> str:
    """The text of the first element matching ``css`` ("" if none)."""
    return driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';", css
    )


def texts_of(driver: webdriver.Chrome, css: str) -> list[str]:
    """The text of every element matching ``css``."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), e => e.textContent);", css
    )


def rows_of(driver: webdriver.Chrome, css: str) -> list[list[str]]:
    """The cells' texts of every table row matching ``css``."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]),"
        " r => Array.from(r.cells, c => c.textContent));",
        css,
    )


def open_page(driver: webdriver.Chrome, page: str) -> None:
    """Follow the navigation link, as a user does (a hash change, no reload)."""
    driver.find_element(By.CSS_SELECTOR, f'nav a[data-page="{page}"]').click()
    wait_for(
        driver, f"the {page} page", lambda d: d.find_element(By.ID, f"page-{page}").is_displayed()
    )


def screenshot(driver: webdriver.Chrome, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"console-{name}.png"
    assert driver.save_screenshot(str(path)), path
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SCREENSHOTS / path.name)
    return path


def severe_entries(driver: webdriver.Chrome) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
