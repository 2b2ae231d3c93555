"""Headless Chromium from Debian's packages (chromium, chromium-driver), driven by Selenium: the browser tier's and
the dashboard benchmark's browser."""

import shutil
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromedriver")


def chromium_paths() -> tuple[str, str]:
    """Debian's chromium and chromium-driver (scripts/install-node-packages.sh installs them); missing is an error."""
    browser = shutil.which("chromium") or CHROMIUM[0]
    driver = shutil.which("chromedriver") or CHROMIUM[1]
    missing = [path for path in (browser, driver) if not Path(path).is_file()]
    if missing:
        raise RuntimeError(f"{missing} not installed: run scripts/install-node-packages.sh (chromium, chromium-driver)")
    return browser, driver


def start_chromium(downloads: Path, width: int = 1400, height: int = 1000) -> webdriver.Chrome:
    """Headless Chromium through chromium-driver, its console kept for the tests, downloads into `downloads`."""
    browser, driver = chromium_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 f"--window-size={width},{height}", "--disable-extensions", "--no-first-run"):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.add_experimental_option(
        "prefs", {"download.default_directory": str(downloads), "download.prompt_for_download": False}
    )
    chrome = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    chrome.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    return chrome
