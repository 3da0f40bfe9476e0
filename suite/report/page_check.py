"""``python -m suite.report.page_check reports/default ...``: open each report's ``index.html`` in
headless Chromium (through Playwright, with the system's Chromium: nothing is downloaded) and
check it as a reader would see it: the first screen is not blank, every image has loaded, and the
MRR table is visible. A screenshot of the first screen is saved for a person to look at. It also
reads the style record beside each plot (``plots/<name>.styles.json``, written by the report from
the drawn lines): no two lines of one plot may share a colour and a marker.

``make report-check`` first runs ``suite.report.readme_check`` (README's marked tables against the
reports they quote; no browser needed), then this on every report under ``reports/``; CI runs that
when Chromium is installed (Debian: ``apt-get install chromium``).
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np

from suite.commandline import parser
from suite.report.styles import clashes

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
VIEWPORT = {"width": 1280, "height": 1000}


def find_chromium() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def blank(png: Path) -> bool:
    """True when the screenshot is (nearly) one colour: less than 1 % of its pixels differ from
    the most common one."""
    import matplotlib.image

    pixels = matplotlib.image.imread(png)[..., :3].reshape(-1, 3)
    values, counts = np.unique((pixels * 255).astype(np.uint8), axis=0, return_counts=True)
    return 1 - counts.max() / counts.sum() < 0.01


def style_problems(report: Path) -> list[str]:
    """Plots of ``report`` whose lines a reader cannot tell apart (two share a colour and a marker),
    or that have no style record to tell (a report built before records were written: rebuild it)."""
    problems = []
    for png in sorted((Path(report) / "plots").glob("*.png")):
        record = png.with_suffix(".styles.json")
        if not record.is_file():
            problems.append(f"plots/{png.name} has no style record plots/{record.name} (rebuild the report)")
            continue
        problems += [f"plots/{png.name}: {c}" for c in clashes(json.loads(record.read_text())["lines"])]
    return problems


def check_page(page, html: Path, screenshot: Path) -> list[str]:
    """Problems a reader of ``html`` would meet; the first screen is saved to ``screenshot``."""
    page.goto(html.resolve().as_uri())
    page.wait_for_load_state("load")
    problems = []
    images = page.evaluate("Array.from(document.images).map(i => [i.alt, i.complete && i.naturalWidth > 0])")
    if not images:
        problems.append("no images")
    problems += [f"image {alt!r} did not load" for alt, ok in images if not ok]
    mrr = page.locator("#mrr")
    if mrr.count() != 1 or not mrr.is_visible():
        problems.append("the MRR table is not visible")
    elif (box := mrr.bounding_box()) is None or box["width"] < 100 or box["height"] < 20:
        problems.append(f"the MRR table is drawn too small to read: {box}")
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(screenshot))
    if blank(screenshot):
        problems.append(f"the first screen is blank ({screenshot})")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = parser("python -m suite.report.page_check", __doc__, whole_doc=True)
    p.add_argument("reports", nargs="+", type=Path, help="report folders holding index.html")
    p.add_argument("--screenshots", type=Path, default=Path("outputs/report-check"),
                   help="where the first-screen screenshots go (default: outputs/report-check)")
    args = p.parse_args(argv)
    browser_path = find_chromium()
    if browser_path is None:
        p.error(f"no Chromium found (looked for {', '.join(BROWSERS)}); on Debian: apt-get install chromium")
    missing = [str(r) for r in args.reports if not (r / "index.html").is_file()]
    if missing:
        p.error(f"no index.html in {', '.join(missing)}; build one with make report SWEEP=<sweep>")
    from playwright.sync_api import sync_playwright

    failed = 0
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        page = browser.new_page(viewport=VIEWPORT)
        for report in args.reports:
            shot = args.screenshots / f"{report.name}.png"
            problems = style_problems(report) + check_page(page, report / "index.html", shot)
            failed += bool(problems)
            print(f"{report}: " + ("; ".join(problems) if problems else f"ok (screenshot {shot})"))
        browser.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
