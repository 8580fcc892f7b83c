"""The campaign's report page, results/<c>/report/index.html, opened in a real browser
(Debian's headless Chromium, driven by chromedriver): it loads with no console error, every
image is decoded, and clicking a column header sorts the cells table."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PLUGIN, REPO
from test_faults import config, store
from test_workflow import env_for

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
# both tests read one campaign, built once per worker; the group keeps them on one worker
pytestmark = pytest.mark.xdist_group("report_page")


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """(page, config) of a small campaign with a wrong cell, built once; tests only read it."""
    return _campaign(tmp_path_factory.mktemp("page"))


def _campaign(tmp_path):
    cfg = config(tmp_path, {
        "small": {"libraries": ["mpich"], "algorithms": ["native:auto", "native:ring",
                                                          "test:wrong"],
                  "procs": [2], "sizes": ["8B", "4KiB"]}}, plugins=[PLUGIN])
    out = subprocess.run(
        [str(Path(sys.executable).parent / "snakemake"), "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(tmp_path / "work"), "--configfile", str(cfg)],
        env=env_for(tmp_path), capture_output=True, text=True, timeout=900, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    return store(tmp_path) / "report" / "index.html", cfg


def test_page_content(campaign):
    page, cfg = campaign
    text = page.read_text()
    for needle in ("Allreduce campaign", "MPICH Version", "Cells by status", "wrong",
                   "result differs from the reference", "Castelló et al.",
                   "harness run --campaign wf --cell", f"--configfile {cfg}",
                   "data:image/png;base64,", "summary.csv"):
        assert needle in text, needle
    assert "http://" not in text and "https://" not in text  # nothing fetched from a network
    # read like a paper: contents first, then per report its figures before its tables
    assert text.index('id="contents"') < text.index('id="findings"') < text.index(
        'id="r-auto_vs_best"') < text.index('id="status"')
    start = text.index('id="r-auto_vs_best"')
    section = text[start:text.index("</section>", start)]
    assert section.index("<img") < section.index("<table")
    assert "| " not in section  # the tables' HTML, not their Markdown
    # the cells by status per experiment, the experiment read from the run specs
    counts = text[text.index('class="counts"'):]
    assert "<td>small</td>" in counts[:counts.index("</table>")]
    assert len(text) < 1_500_000


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER) and os.environ.get("HARNESS_BROWSER_TESTS") != "1",
                    reason="Debian's chromium and chromium-driver are not installed "
                           "(.ci/run installs them with .ci/chromium.sh and sets "
                           "HARNESS_BROWSER_TESTS=1, which makes their absence a failure)")
def test_page_in_headless_chromium(tmp_path, campaign):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    assert CHROMIUM and CHROMEDRIVER, "chromium / chromedriver not found (.ci/chromium.sh)"
    page, _ = campaign
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
                "--allow-file-access-from-files"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        driver.get(page.as_uri())
        assert driver.title.startswith("wf")
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
        widths = driver.execute_script(
            "return [...document.images].map(i => i.complete ? i.naturalWidth : 0)")
        assert widths and all(w > 0 for w in widths), widths
        headers = driver.find_elements(By.CSS_SELECTOR, "#cells thead th")
        names = [h.text for h in headers]
        col = names.index("algorithm")

        def column():
            return driver.execute_script(
                "return [...document.getElementById('cells').tBodies[0].rows]"
                ".map(r => r.children[arguments[0]].textContent)", col)

        headers[col].click()
        up = column()
        assert up == sorted(up) and len(up) == 6
        headers[col].click()
        assert column() == sorted(up, reverse=True)
        driver.save_screenshot(str(tmp_path / "page.png"))
        shutil.copy(tmp_path / "page.png", page.parent / "screenshot.png")
        assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    finally:
        driver.quit()
