"""The HTML report opened in a real browser (the distribution's headless Chromium): every figure
rendered, no console error, the numbers on the page equal the study's, a screenshot saved.

Without Chromium these tests skip, unless AUTOTUNE_REQUIRE_BROWSER is set (CI sets it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import optuna
import pandas as pd
import pytest

from autotune.units import readable
from tests.cli_in_process import autotune_in_process

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and os.environ.get("AUTOTUNE_REQUIRE_BROWSER"):
    pytest.fail("AUTOTUNE_REQUIRE_BROWSER is set but no chromium is installed", pytrace=False)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium (apt-get install chromium)")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--enable-unsafe-swiftshader",
    "--hide-scrollbars",
]


def _artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("AUTOTUNE_TEST_ARTIFACTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_in_browser(page: Path, screenshot: Path) -> tuple[str, str]:
    """The DOM after the page's scripts ran, and the browser's log (console included), with a
    screenshot saved: one browser run does all three (a browser's start and the page's
    drawing are most of a test's time). The page is opened as a copy beside it whose first
    script marks each ``console.error`` (:data:`ERROR_PROBE`): headless Chromium 156 logs one
    as ``INFO:CONSOLE``, as it does ``console.log``."""
    probed = page.with_name(f"{page.stem}.probed{page.suffix}")
    text = page.read_text(encoding="utf-8")
    head = re.search(r"<head[^>]*>", text, re.IGNORECASE)
    at = head.end() if head else 0
    probed.write_text(text[:at] + ERROR_PROBE + text[at:], encoding="utf-8")
    done = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1400,5200",
            "--virtual-time-budget=10000",
            "--dump-dom",
            f"--screenshot={screenshot}",
            probed.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    return done.stdout, done.stderr


#: The first script of a page :func:`open_in_browser` opens: each ``console.error`` logged with
#: a mark that :func:`console_errors` finds, whatever level the browser logs it at.
ERROR_PROBE = (
    "<script>(() => { const error = console.error.bind(console); "
    'console.error = (...args) => error("AUTOTUNE_CONSOLE_ERROR", ...args); })();</script>'
)


def console_errors(log: str) -> list[str]:
    """Console messages that are errors or uncaught exceptions (not the browser's own noise)."""
    lines = [line for line in log.splitlines() if "CONSOLE" in line]
    marks = ("Uncaught", "ERROR:CONSOLE", '"Error', "AUTOTUNE_CONSOLE_ERROR")
    return [line for line in lines if any(mark in line for mark in marks)]


def test_a_console_error_or_an_uncaught_exception_is_caught(tmp_path) -> None:
    """What the report's tests assert is absent can be seen: a page's console.error (logged by
    Chromium 156 at the level of console.log) and an uncaught exception."""
    page = tmp_path / "errs.html"
    page.write_text(
        "<html><head></head><body><script>console.log('fine'); "
        "console.error('boom'); throw new Error('thrown');</script></body></html>"
    )
    _, log = open_in_browser(page, tmp_path / "errs.png")
    found = console_errors(log)
    assert len(found) == 2, log
    assert "boom" in found[0] and "thrown" in found[1]


def figures(dom: str) -> dict[str, str]:
    found = {}
    for match in re.finditer(r'<section class="autotune-figure" data-figure="(\w+)">', dom):
        end = dom.find("</section>", match.end())
        found[match.group(1)] = dom[match.end() : end]
    return found


def _page_data(dom: str) -> dict:
    match = re.search(
        r'<script id="autotune-data" type="application/json">(.*?)</script>', dom, re.S
    )
    assert match, "the page's data block is missing"
    return json.loads(match.group(1).replace("<\\/", "</"))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> tuple[str, Path]:
    """A real replay sweep (with its noise-aware finish off: replay has no noise) of a recorded
    landscape with failures."""
    folder = tmp_path_factory.mktemp("sweep")
    rows = []
    for bm in (16, 32, 64, 128, 256):
        for bn in (32, 64, 128, 256):
            for warps in (4, 8):
                ok = bm * bn <= 128 * 128
                rows.append(
                    {
                        "BM": bm,
                        "BN": bn,
                        "warps": warps,
                        "status": "ok" if ok else "out_of_resources",
                        "tflops": (100.0 + bm + bn / 2) * (1 + warps / 16) if ok else None,
                    }
                )
    pd.DataFrame(rows).to_csv(folder / "grid.csv", index=False)
    url = f"sqlite:///{folder / 's.db'}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "autotune.cli",
            "tune",
            "--replay",
            str(folder / "grid.csv"),
            "--params",
            "BM,BN,warps",
            "--metric",
            "tflops",
            "--maximize",
            "--trials",
            "30",
            "--seed",
            "0",
            "--storage",
            url,
            "--study",
            "r",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return url, folder


def test_every_figure_renders_without_console_errors_and_shows_the_studys_numbers(
    sweep, tmp_path
) -> None:
    url, folder = sweep
    page = folder / "report.html"
    # a reader of the stored study: run in this process (no process start, no imports of its own)
    done = autotune_in_process("report", "--storage", url, "--study", "r", "--output", str(page))
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    # the table records no device: the replaying machine is not named as where it was measured
    assert "Figures: replay of a recorded table, device not recorded" in text
    assert re.search(r"<script[^>]+src=", text) is None  # plotly.js inlined: nothing fetched
    assert re.search(r"<link[^>]+href=", text) is None
    screenshot = _artifacts(tmp_path) / "report-replay.png"
    dom, log = open_in_browser(page, screenshot)
    assert console_errors(log) == []
    shown = figures(dom)
    assert {"history", "importances", "parallel", "slices", "failures"} <= set(shown)
    for name, html in shown.items():  # plotly drew each one: its SVG root is in the DOM
        assert "main-svg" in html, f"figure {name} did not render"
    study = optuna.load_study(study_name="r", storage=url)
    best = max(t.value for t in study.trials if t.user_attrs.get("status") == "ok")
    data = _page_data(dom)
    assert data["best_value"] == pytest.approx(best)
    assert data["winner_value"] == pytest.approx(best)
    assert readable("tflops", best) in dom  # the number a person reads on the page
    assert data["statuses"]["out_of_resources"] > 0  # the failures panel counts them
    assert screenshot.exists() and screenshot.stat().st_size > 10_000


def test_a_multi_objective_study_gets_its_pareto_front(tmp_path) -> None:
    from autotune.report import report_html

    study = optuna.create_study(
        directions=["maximize", "minimize"], sampler=optuna.samplers.RandomSampler(seed=0)
    )
    study.optimize(
        lambda t: (t.suggest_float("x", 0, 1), t.suggest_float("y", 0, 1) ** 2 + t.params["x"]),
        n_trials=20,
    )
    page = tmp_path / "pareto.html"
    page.write_text(report_html(study))
    dom, log = open_in_browser(page, _artifacts(tmp_path) / "report-pareto.png")
    assert console_errors(log) == []
    assert "main-svg" in figures(dom)["pareto"]


def test_the_live_report_serves_the_current_study(sweep) -> None:
    import urllib.request

    from autotune.report import report_html
    from autotune.report_server import make_server
    from autotune.storage import load_study, open_storage

    url, _ = sweep
    server = make_server(lambda: report_html(load_study(open_storage(url), "r")), 0)
    import threading

    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=60).read().decode()
        assert 'http-equiv="refresh"' in body and 'data-figure="history"' in body
    finally:
        server.shutdown()
