"""The dashboard as a test drives it: sign in, go to a view, read what the page shows, wait for it to change
(WebDriverWait with a deadline: never a sleep), save screenshots named after the test."""

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver import Chrome
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

T = TypeVar("T")
TIMEOUT = 30.0
# Answers the page expects and handles (a refused token, a denied view): Chromium logs each one as an error.
EXPECTED_FAILURES = ("status of 401", "status of 403", "status of 404")


class Dashboard:
    """One browser on the dashboard at `url`; screenshots go to `screenshots`/<stem>-<label>.png."""

    def __init__(self, driver: Chrome, url: str, screenshots: Path, stem: str, downloads: Path) -> None:
        self.driver, self.url, self.screenshots, self.stem, self.downloads = driver, url, screenshots, stem, downloads

    def reset(self) -> None:
        """No token in the tab, no page open, the console read."""
        self.driver.get(f"{self.url}/ui/")
        self.driver.execute_script("sessionStorage.clear()")
        self.driver.get("about:blank")
        self._console()

    def screenshot(self, label: str) -> Path:
        self.screenshots.mkdir(parents=True, exist_ok=True)
        path = self.screenshots / f"{self.stem}-{label}.png"
        size = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 6000), "scale": 1}
        shot = self.driver.execute_cdp_cmd("Page.captureScreenshot", {"clip": clip, "captureBeyondViewport": True})
        path.write_bytes(base64.b64decode(shot["data"]))  # the whole page, not only the window
        return path

    def wait(self, condition: Callable[[Chrome], T | None], what: str, timeout: float = TIMEOUT) -> T:
        """The first truthy answer of `condition`, polled until `timeout`; on timeout a screenshot and the page."""
        waiting = WebDriverWait(
            self.driver, timeout, poll_frequency=0.2,
            ignored_exceptions=(NoSuchElementException, StaleElementReferenceException),
        )  # fmt: skip
        try:
            found = waiting.until(condition, message=what)
        except TimeoutException as error:
            shot = self.screenshot("timeout")
            body = self.driver.find_element(By.TAG_NAME, "body").text[-3000:]
            raise AssertionError(f"timed out waiting for {what} (screenshot {shot}); the page says:\n{body}") from error
        assert found is not None  # until() returns only a truthy answer
        return found

    def find(self, css: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def all(self, css: str) -> list[WebElement]:
        return list(self.driver.find_elements(By.CSS_SELECTOR, css))

    def text(self, css: str) -> str:
        return str(self.find(css).text)

    def wait_text(self, css: str, check: Callable[[str], bool], what: str, timeout: float = TIMEOUT) -> str:
        def seen(_: Chrome) -> str | None:
            found = self.text(css)
            return found if check(found) else None

        return self.wait(seen, f"{what} ({css})", timeout)

    def open(self, route: str = "/jobs") -> None:
        self.driver.get(f"{self.url}/ui/#{route}")

    def sign_in(self, token: str) -> str:
        """Paste `token` into the login form; the user name the header then shows."""
        self.open()
        field = self.wait(lambda d: self.find("#token"), "the login form")
        field.send_keys(token)
        self.find("#login-submit").click()
        return self.wait_text("#username", bool, "the signed-in user's name")

    def job_rows(self) -> dict[str, str]:
        """The jobs table: namespace/name -> phase."""
        rows = self.all("#jobs-rows tr")
        return {str(r.get_attribute("data-key")): str(r.get_attribute("data-phase")) for r in rows}

    def wait_rows(self, check: Callable[[dict[str, str]], bool], what: str, timeout: float = TIMEOUT) -> dict[str, str]:
        def seen(_: Chrome) -> dict[str, str] | None:
            rows = self.job_rows()
            return rows if check(rows) else None

        return self.wait(seen, what, timeout)

    def session_storage(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.driver.execute_script("return JSON.stringify({...sessionStorage})"))
        return found

    def console_errors(self) -> list[str]:
        """Errors the page logged (script errors, CSP violations), less the refused answers it expects."""
        entries = self._console()
        return [
            str(e["message"])
            for e in entries
            if e.get("level") == "SEVERE" and not any(expected in str(e["message"]) for expected in EXPECTED_FAILURES)
        ]

    def _console(self) -> list[dict[str, Any]]:
        """What the page logged since the last call (Chromium hands each entry out once)."""
        entries: list[dict[str, Any]] = self.driver.get_log("browser")  # type: ignore[no-untyped-call]
        return entries
