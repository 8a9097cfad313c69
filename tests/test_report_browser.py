"""The report in a real browser: Debian's headless Chromium, driven by Playwright.

For two examples (the DGX A100 SuperPOD and the 4-node MIG lab) the test writes the report
with `railplan report`, opens it from disk and checks what a reader would see: the page is
not blank (pixel variance of a screenshot), every SVG and the rack devices in it have a
size, nothing was logged to the console, no request left for anything but the file itself,
and in print layout on A4 no SVG is wider than the page. Screenshots (the first screen and
the whole page) and the A4 PDF are written to ``RAILPLAN_SCREENSHOTS`` if set, else to the
test's temporary directory; the test prints where.

Chromium comes from Debian (`make test` installs it as root with apt-get); Playwright's own
browser download is never used. Without Chromium or Playwright the test skips, except under
CI (``CI`` set), where that is a failure.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .conftest import ROOT
from .test_cli import railplan

if TYPE_CHECKING:
    from collections.abc import Iterator

    from playwright.sync_api import Browser, Page

CHROMIUM = os.environ.get("RAILPLAN_CHROMIUM", "/usr/bin/chromium")
EXAMPLES = ["dgx-a100-superpod", "a100-lab-mig"]
A4_CSS_PX = 794  # 210 mm at 96 px per inch


@contextlib.contextmanager
def opened(html: Path) -> Iterator[tuple[Page, Browser, list[str], list[str]]]:
    """``html`` loaded in headless Chromium: page, browser, console messages and requests.

    Messages and requests are recorded from before the load; the browser closes on exit.
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            console: list[str] = []
            requests: list[str] = []
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(html.as_uri(), wait_until="load")
            yield page, browser, console, requests
        finally:
            browser.close()


def _missing() -> str:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return (
            "the playwright package is not installed (pip install -c requirements.lock -e '.[dev]')"
        )
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        return f"no Chromium at {CHROMIUM} (as root: apt-get install chromium; `make test` does)"
    return ""


def _require_browser() -> None:
    missing = _missing()
    if missing and os.environ.get("CI"):
        pytest.fail(f"browser test cannot run on CI: {missing}")
    if missing:
        pytest.skip(missing)


_VARIANCE = """async (png) => {
  const img = new Image();
  img.src = 'data:image/png;base64,' + png;
  await img.decode();
  const canvas = document.createElement('canvas');
  [canvas.width, canvas.height] = [img.naturalWidth, img.naturalHeight];
  const context = canvas.getContext('2d');
  context.drawImage(img, 0, 0);
  const d = context.getImageData(0, 0, canvas.width, canvas.height).data;
  let sum = 0, squares = 0;
  for (let i = 0; i < d.length; i += 4) {
    const gray = (d[i] + d[i + 1] + d[i + 2]) / 3;
    sum += gray;
    squares += gray * gray;
  }
  const n = d.length / 4;
  return squares / n - (sum / n) ** 2;
}"""


def _gray_variance(browser: Browser, png: bytes) -> float:
    """Variance of a screenshot's gray levels (0 when blank), computed on a scratch page."""
    scratch = browser.new_page()
    try:
        return float(scratch.evaluate(_VARIANCE, base64.b64encode(png).decode()))
    finally:
        scratch.close()


def _shots_dir(tmp_path: Path) -> Path:
    chosen = os.environ.get("RAILPLAN_SCREENSHOTS")
    out = Path(chosen) if chosen else tmp_path
    out.mkdir(parents=True, exist_ok=True)
    return out


_MEASURE = """() => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.width, r.height]; };
  return {
    svgs: [...document.querySelectorAll('svg')].map(box),
    devices: [...document.querySelectorAll('g.rack rect[data-u]')].map(box),
    sections: [...document.querySelectorAll('section')].map((s) => s.id),
    widest: Math.max(...[...document.querySelectorAll('svg')].map(
      (e) => e.getBoundingClientRect().right)),
  };
}"""


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_report_renders_in_chromium(example: str, tmp_path: Path) -> None:
    _require_browser()
    html = tmp_path / f"{example}.html"
    result = railplan("report", str(ROOT / "examples" / f"{example}.yaml"), "-o", str(html))
    assert result.returncode == 0, result.stderr
    shots = _shots_dir(tmp_path)
    svg_count = html.read_text().count("<svg ")
    with opened(html) as (page, browser, console, requests):
        first = page.screenshot(path=str(shots / f"{example}-top.png"))
        page.screenshot(path=str(shots / f"{example}-page.png"), full_page=True)
        screen = page.evaluate(_MEASURE)
        page.emulate_media(media="print")
        page.set_viewport_size({"width": A4_CSS_PX, "height": 1123})
        printed = page.evaluate(_MEASURE)
        pdf = page.pdf(path=str(shots / f"{example}.pdf"), format="A4")
        variance = _gray_variance(browser, first)
    print(f"screenshots and PDF of {example}: {shots}")
    assert console == []
    assert requests == [html.as_uri()]
    assert variance > 100, f"the first screen is blank (gray variance {variance:.1f})"
    assert len(screen["svgs"]) == svg_count > 0
    assert all(w > 10 and h > 10 for w, h in screen["svgs"]), screen["svgs"]
    assert screen["devices"] and all(w > 0 and h > 0 for w, h in screen["devices"])
    assert screen["sections"][-1] == "lint"
    assert printed["widest"] <= A4_CSS_PX, "an SVG is wider than the printed page"
    assert pdf.startswith(b"%PDF")
