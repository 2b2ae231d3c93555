"""The dashboard as a test drives it: sign in, go to a view, read what the page shows, wait for it to change
(WebDriverWait with a deadline: never a sleep), save screenshots named after the test.

The pages re-render as their data arrives (a job page on every watch event, the cluster and sweep views every few
seconds): an element found a moment ago may be gone from the page (StaleElementReferenceException). So nothing here
hands a test an element to read later: every read finds its elements afresh and takes plain values (text,
attributes, enabled) in one go, taken again if the page re-rendered midway; every click finds its target afresh."""

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
        """The first truthy answer of `condition`, polled until `timeout`: an element missing or re-rendered while
        `condition` reads it is "not yet". On timeout a screenshot and the page."""
        return self._poll(condition, what, timeout, (NoSuchElementException, StaleElementReferenceException))

    def read(self, take: Callable[[], T], what: str) -> T:
        """What `take` reads off the page as it is now, read again if the page re-rendered an element midway (a
        missing element fails: reading waits for no change)."""
        return self._poll(lambda _: (take(),), what, TIMEOUT, (StaleElementReferenceException,))[0]

    def _poll(
        self, condition: Callable[[Chrome], T | None], what: str, timeout: float, ignored: tuple[type[Exception], ...]
    ) -> T:
        waiting = WebDriverWait(self.driver, timeout, poll_frequency=0.2, ignored_exceptions=ignored)
        try:
            found = waiting.until(condition, message=what)
        except TimeoutException as error:
            shot = self.screenshot("timeout")
            body = self.driver.find_element(By.TAG_NAME, "body").text[-3000:]
            raise AssertionError(f"timed out waiting for {what} (screenshot {shot}); the page says:\n{body}") from error
        assert found is not None  # until() returns only a truthy answer
        return found

    def find(self, css: str) -> WebElement:
        """The element now at `css`: for a condition of wait() or a take of read(), which find it afresh each time."""
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def all(self, css: str) -> list[WebElement]:
        """The elements now at `css`: for a condition of wait() or a take of read(), like find()."""
        return list(self.driver.find_elements(By.CSS_SELECTOR, css))

    def text(self, css: str) -> str:
        return self.read(lambda: str(self.find(css).text), f"the text of {css}")

    def enabled(self, css: str) -> bool:
        return self.read(lambda: bool(self.find(css).is_enabled()), f"whether {css} is enabled")

    def values(self, css: str, take: Callable[[WebElement], T]) -> list[T]:
        """`take` of each element at `css`, read again if the page re-rendered one of them midway."""
        return self.read(lambda: [take(element) for element in self.all(css)], f"the elements at {css}")

    def wait_values(
        self, css: str, take: Callable[[WebElement], T], check: Callable[[list[T]], bool], what: str,
        timeout: float = TIMEOUT,
    ) -> list[T]:  # fmt: skip
        """values(css, take) once `check` accepts them."""

        def seen(_: Chrome) -> tuple[list[T]] | None:
            found = [take(element) for element in self.all(css)]
            return (found,) if check(found) else None

        return self.wait(seen, f"{what} ({css})", timeout)[0]

    def act(self, css: str, action: Callable[[WebElement], object], what: str) -> None:
        """`action` on the element at `css`, found afresh, and found again if the page re-rendered it before the
        action landed (a stale element refuses the action: nothing was done to it)."""

        def done(_: Chrome) -> bool:
            action(self.find(css))
            return True

        self.wait(done, what)

    def click(self, css: str) -> None:
        self.act(css, lambda element: element.click(), f"a click on {css}")

    def type(self, css: str, text: str) -> None:
        self.act(css, lambda element: element.send_keys(text), f"typing into {css}")

    def wait_text(self, css: str, check: Callable[[str], bool], what: str, timeout: float = TIMEOUT) -> str:
        def seen(_: Chrome) -> tuple[str] | None:
            found = str(self.find(css).text)
            return (found,) if check(found) else None

        return self.wait(seen, f"{what} ({css})", timeout)[0]

    def open(self, route: str = "/jobs") -> None:
        self.driver.get(f"{self.url}/ui/#{route}")

    def sign_in(self, token: str) -> str:
        """Paste `token` into the login form; the user name the header then shows."""
        self.open()
        self.type("#token", token)
        self.click("#login-submit")
        return self.wait_text("#username", bool, "the signed-in user's name")

    def job_rows(self) -> dict[str, str]:
        """The jobs table: namespace/name -> phase."""
        return dict(self.values("#jobs-rows tr", _key_and_phase))

    def wait_rows(self, check: Callable[[dict[str, str]], bool], what: str, timeout: float = TIMEOUT) -> dict[str, str]:
        rows = self.wait_values("#jobs-rows tr", _key_and_phase, lambda found: check(dict(found)), what, timeout)
        return dict(rows)

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


def _key_and_phase(row: WebElement) -> tuple[str, str]:
    return str(row.get_attribute("data-key")), str(row.get_attribute("data-phase"))
