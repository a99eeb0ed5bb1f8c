"""A real browser for the dashboard's tests: Debian's Chromium driven by its chromedriver
through Selenium, headless, with what this machine's closed network needs (no background
networking, no component updates). Tests skip where none is installed (CI installs
Debian's chromium and chromium-driver: .ci/run)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def artifacts() -> Path:
    """Where tests keep what a person looks at afterwards (screenshots): DISTA_ARTIFACTS,
    else test-artifacts/ in the checkout."""
    folder = Path(os.environ.get("DISTA_ARTIFACTS") or ROOT / "test-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def chromium(width: int = 1600, height: int = 1300) -> Iterator[Any]:
    """A headless Chromium (a Selenium driver) that logs the page's console."""
    webdriver = pytest.importorskip("selenium.webdriver")
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.skip("no Chromium (apt-get install chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="dista-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def console_errors(driver: Any) -> list[str]:
    """The page's console errors since the last call (SEVERE entries)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
