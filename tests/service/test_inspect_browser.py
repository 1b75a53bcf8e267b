"""The inspector page driven as a person uses it, in headless Chromium (Debian's ``chromium`` and
``chromium-driver``, through Selenium), against a ``tiermem serve`` started here with the demo
ingested: open Maya, search "flight", open the newest entry and read its source turn and
history, ask "When is my flight?" and find the 9 October turn in the context with its score
explanation, read the answer, then erase Leo.

Set ``TIERMEM_INSPECT_SCREENSHOT=docs/inspect.png`` to refresh the README's screenshot."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tiermem.remote import RemoteMemory
from tiermem.service.launch import ServerProcess

from tests.service.conftest import make_keys, write_config
from tests.service.test_inspect import ingest_demo

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
WAIT_S = 30


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        why = (
            "no Chromium here (chromium and chromedriver): `make test` installs Debian's "
            "chromium and chromium-driver where apt-get runs as root"
        )
        if os.environ.get("TIERMEM_REQUIRE_BROWSER") == "1":  # make test installed it: run
            pytest.fail(why)
        pytest.skip(why)
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium: pip install '.[dev]'")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument("--window-size=1440,1200")
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """``tiermem serve`` (hash embedder, on-disk Qdrant, model-free) with acme's demo users."""
    root = tmp_path_factory.mktemp("browser")
    keys = make_keys(root)
    server = ServerProcess(write_config(root), keys.path, log_file=root / "serve.log").start()
    try:
        with RemoteMemory(server.url, keys.acme) as acme:
            ingest_demo(acme)
        yield server.url, keys.acme
    finally:
        server.stop()


def test_a_person_finds_why_the_flight_answer_says_9_october(
    browser: Any, service: tuple[str, str], tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    url, key = service
    wait = WebDriverWait(browser, WAIT_S)

    def shown(css: str) -> Any:
        return wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, css)))

    def text_in(css: str, text: str) -> None:
        wait.until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, css), text))

    browser.get(f"{url}/inspect#key={key}")
    assert "#key" not in browser.current_url  # the key leaves the address bar
    shown('#users button[data-user="maya"]').click()
    text_in("#user-title", "maya")

    # search "flight", open the newest entry: its source turn and its history
    shown("#memory-query").send_keys("flight")
    text_in("#memory-count", "entries, newest first")
    wait.until(lambda _: all("flight" in r.text for r in _rows(browser)))
    newest = _rows(browser)[0]
    assert "9 October" in newest.text
    newest.click()
    entry = shown("#entry")
    text_in("#entry table.turns", "maya-s4")
    turns = entry.find_element(By.CSS_SELECTOR, "table.turns").text
    assert "Maya" in turns
    assert "I moved my flight one day earlier to 9 October" in turns
    assert "30 Sept 2026" in turns
    assert "created" in entry.find_element(By.CSS_SELECTOR, "table.history").text
    assert entry.find_element(By.ID, "superseded-by").text == "nothing: it holds"

    # ask: the 9 October turn is in the context, kept, with its hit's explanation
    browser.find_element(By.CSS_SELECTOR, '.tabs button[data-tab="ask"]').click()
    shown("#ask-query").send_keys("When is my flight?")
    browser.find_element(By.ID, "ask-context").click()
    text_in("#context-text", "9 October")
    unit = next(
        row
        for row in browser.find_elements(By.CSS_SELECTOR, "table.units tr.kept")
        if "moved my flight one day earlier to 9 October" in row.text and "the hit" in row.text
    )
    explanation = unit.find_element(By.CSS_SELECTOR, ".explanation").text
    assert "dense" in explanation
    assert "selector" in explanation
    assert "kept" in unit.text
    browser.execute_script("window.scrollTo(0, 0)")
    screenshot = Path(os.environ.get("TIERMEM_INSPECT_SCREENSHOT") or tmp_path / "inspect.png")
    assert browser.save_screenshot(str(screenshot))

    browser.find_element(By.ID, "ask-answer").click()
    text_in("#answer pre", "9 October")

    # the knowledge tab says LTM is off; erasing Leo takes a typed confirmation
    browser.find_element(By.CSS_SELECTOR, '.tabs button[data-tab="knowledge"]').click()
    text_in("#knowledge", "LTM is off")
    shown('#users button[data-user="leo"]').click()
    text_in("#user-title", "leo")
    browser.find_element(By.CSS_SELECTOR, '.tabs button[data-tab="erase"]').click()
    erase = shown("#erase-button")
    assert not erase.is_enabled()
    shown("#erase-confirm").send_keys("leo")
    erase.click()
    text_in("#erase-report", "entries")
    assert browser.find_elements(By.CSS_SELECTOR, '#users button[data-user="leo"]') == []
    assert not browser.find_element(By.ID, "error").is_displayed()


def _rows(browser: Any) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(browser.find_elements(By.CSS_SELECTOR, "#memories tbody tr"))
