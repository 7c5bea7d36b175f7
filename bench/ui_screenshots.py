"""The README's screenshots of `memd ui`, made by a script (issue 26), never by hand.

    .venv/bin/python bench/ui_screenshots.py [--claude-data ../shared/claude-data] [--out docs/img]

A copy of the real Claude Code data (read-only: copied to a temp HOME first) gets two projects of
made-up memory beside its own (so the real data's words stay out of the pictures): one whose index links
a file that is gone, repaired by a keyless run (``memd dream --force`` without a key keeps the line's
words as a plain line: a run with a diff), and one whose index is past Claude Code's budget. Then the
viewer is started in this process and headless Chromium (Debian's ``chromium`` and ``chromium-driver``,
through selenium) saves the first screen, the big project's page at its cut, the run opened to its
diff, the big project's timeline and two charts (a month of made-up runs and index samples, seeded), and
the confirmation page of the small project's undo (not confirmed), as PNG files. Needs the ``test``
extra (selenium, jinja2).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "-home-me-src-shop"  # made up here: gets a run with a diff
BIG = "-home-me-src-platform"  # made up here, past the budget: the page draws the cut
CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
DRIVER = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")


def _first(paths: tuple[str, ...]) -> str | None:
    return next((p for p in paths if os.access(p, os.X_OK)), shutil.which(os.path.basename(paths[0])))


def _topic(name: str, description: str, body: str, kind: str = "project") -> str:
    return f"---\nname: {name}\ndescription: {description}\ntype: {kind}\n---\n\n{body}\n"


def _made_up(projects: Path) -> None:
    """Two projects of invented memory (the real data's words stay out of the README's pictures)."""
    shop = projects / PROJECT / "memory"
    shop.mkdir(parents=True)
    facts = [("tabs", "feedback", "Indent with tabs in Go, 4 spaces in Python", "The linter enforces it."),
             ("deploys", "project", "Deploys go out on Tuesdays through the release train", "Ask in #releases."),
             ("role", "user", "The user is a backend engineer who reviews SQL first", "Explain joins briefly."),
             ("tests", "feedback", "Run the integration suite before a PR", "`make it` starts the containers.")]
    lines = ["# Memory", ""]
    for name, kind, desc, body in facts:
        (shop / f"{kind}_{name}.md").write_text(_topic(name, desc, f"{desc}. {body}", kind), encoding="utf-8")
        lines.append(f"- [{name.title()}]({kind}_{name}.md) — {desc}")
    lines.append("- [VPN notes](vpn_notes.md) — ask Sam for the staging VPN token")  # its file is gone
    (shop / "MEMORY.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    big = projects / BIG / "memory"
    big.mkdir(parents=True)
    lines = ["# Platform memory", ""]
    areas = ["billing", "search", "auth", "queue", "cache", "ingest", "reports", "mobile"]
    for i in range(230):
        area = areas[i % len(areas)]
        name = f"{area} note {i + 1}"
        desc = (f"how the {area} service handles case {i + 1}: retries, timeouts and the alert that pages "
                "the on-call engineer")
        rel = f"project_{area}_{i + 1}.md"
        (big / rel).write_text(_topic(name, desc, desc.capitalize() + "."), encoding="utf-8")
        lines.append(f"- [{name.title()}]({rel}) — {desc}")
    (big / "MEMORY.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _made_up_outcome(job: str, rnd: Any) -> tuple[str, str, str | None]:
    """A run's outcome and words, as the jobs word them (made up, seeded)."""
    roll = rnd.random()
    if job == "catchup":
        if roll < 0.2:
            return "unchanged", "1 session read; nothing new to keep", None
        n = rnd.randint(1, 3)
        return "changed", f"{n} session(s) read; {n} memory file(s) added or updated", None
    if roll < 0.1:
        return ("refused", "dream: nothing applied",
                "would delete 9 of 31 files (29%), over dream.max_delete_share 25%; kept for review")
    if roll < 0.15:
        return "failed", "dream: nothing applied", "the model's reply was cut at max_tokens twice"
    merged, pruned = rnd.randint(0, 3), rnd.randint(0, 2)
    return "changed", f"merged {merged} duplicate(s), pruned {pruned} stale entr(ies); MEMORY.md rebuilt", None


def _made_up_nights(state: Path, now: float) -> None:
    """A month of made-up runs and index samples for the big project (the charts: cost per night, and
    its index growing past the budget), as the daemon would have logged them: each night two catch-ups
    (20:00, 01:00) and a dream (03:00), a few quiet nights; fixed by a seed, so the picture repeats."""
    import random

    from memd.core.series import last_night, night_start
    from memd.state import StateStore
    from memd.ui.charts import local_zone

    rnd = random.Random(26)
    tz = local_zone()
    newest = last_night(now, tz)
    with StateStore.open(state) as st:
        for k in range(29, -1, -1):
            start = night_start(newest - timedelta(days=k), tz)
            if k and rnd.random() < 0.15:
                continue  # a quiet night: nothing to catch up, no dream
            for job, hours, cost in (("catchup", 8, 0.004), ("catchup", 13, 0.003), ("dream", 15, 0.03)):
                at = start + hours * 3600
                if at > now:
                    continue
                spent = round(cost * rnd.uniform(0.5, 2.2), 4)
                outcome, summary, error = _made_up_outcome(job, rnd)
                rid = st.start_run(job, BIG, at)
                st.finish_run(rid, outcome=outcome, ended=at + 40, cost_usd=spent, tokens_in=int(spent * 180_000),
                              tokens_out=int(spent * 9_000), summary=summary, error=error)
        lines, chars = 232, 34_017  # the index as it is now, walked back a month: it grew past the budget
        for h in range(6, 30 * 24, 6):
            st.record_index_sample(BIG, now - h * 3600, lines=lines, chars=chars, max_lines=200, max_chars=25_000)
            lines = max(60, lines - rnd.choice((0, 1, 1, 2, 3)))
            chars = max(6_000, chars - rnd.randint(0, 300))
        st.record_index_sample(BIG, now, lines=232, chars=34_017, max_lines=200, max_chars=25_000)


def _sandbox(claude_data: Path, home: Path) -> Path:
    claude = home / ".claude"
    shutil.copytree(claude_data, claude, ignore=shutil.ignore_patterns("SOURCES.tsv"))
    for p in [claude, *claude.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    _made_up(claude / "projects")
    env = {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home / ".local" / "state"),
           "XDG_CONFIG_HOME": str(home / ".config")}
    for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CONFIG_DIR"):
        env.pop(k, None)
    subprocess.run([sys.executable, "-m", "memd", "dream", PROJECT, "--force"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    os.environ.update({k: env[k] for k in ("HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME")})
    for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CONFIG_DIR"):
        os.environ.pop(k, None)
    from memd import layout

    _made_up_nights(layout.state_dir(""), time.time())
    return claude


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--claude-data", type=Path, default=ROOT.parent / "shared" / "claude-data")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = ap.parse_args()
    if not (args.claude_data / "projects").is_dir():
        print(f"ui_screenshots: no projects folder under {args.claude_data}", file=sys.stderr)
        return 2
    chromium, driver = _first(CHROMIUM), _first(DRIVER)
    if chromium is None or driver is None:
        print("ui_screenshots: needs chromium and chromium-driver (apt-get install chromium chromium-driver)",
              file=sys.stderr)
        return 2
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    with tempfile.TemporaryDirectory(prefix="memd-shots-") as tmp:
        claude = _sandbox(args.claude_data, Path(tmp))
        from memd.cli import Context
        from memd.commands.ui import pages, posts
        from memd.ui.server import Running, Viewer

        ctx = Context(argparse.Namespace(claude_dir=str(claude)))
        opts = webdriver.ChromeOptions()
        opts.binary_location = chromium
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                    "--no-first-run", "--disable-extensions", "--window-size=1280,900", "--hide-scrollbars"):
            opts.add_argument(arg)
        browser = webdriver.Chrome(options=opts, service=Service(executable_path=driver))
        args.out.mkdir(parents=True, exist_ok=True)
        try:
            with Running(Viewer(pages(ctx), actions=posts(ctx))) as url:
                browser.get(url)
                base = "{0.scheme}://{0.netloc}".format(urlsplit(url))
                shots = {"ui-projects.png": ("/", ""), "ui-project-cut.png": (f"/project/{quote(BIG)}", "#cut"),
                         "ui-run-diff.png": (f"/project/{quote(PROJECT)}", "details.run"),
                         "ui-timeline.png": (f"/project/{quote(BIG)}", "#history"),
                         "ui-undo-confirm.png": (f"/project/{quote(PROJECT)}", "a.undo-link"),
                         "ui-chart-cost.png": (f"/project/{quote(BIG)}", "#cost-chart"),
                         "ui-chart-size.png": (f"/project/{quote(BIG)}", "#size-chart")}
                for name, (path, element) in shots.items():
                    browser.set_window_size(1280, 900)
                    browser.get(base + path)
                    if element == "details.run":  # the newest run, opened to its diff: that element alone
                        run = browser.find_elements(By.CSS_SELECTOR, element)[0]
                        browser.execute_script("arguments[0].open = true; arguments[0].scrollIntoView()", run)
                        time.sleep(0.5)
                        run.screenshot(str(args.out / name))
                    elif element == "#history":  # the timeline, every run closed
                        browser.find_element(By.CSS_SELECTOR, element).screenshot(str(args.out / name))
                    elif element == "a.undo-link":  # the newest run's undo, at its confirmation (not confirmed)
                        href = browser.find_elements(By.CSS_SELECTOR, element)[0].get_attribute("href")
                        browser.get(str(href))
                        height = browser.execute_script("return document.documentElement.scrollHeight")
                        browser.set_window_size(1280, min(max(400, int(height) + 160), 1400))
                        browser.save_screenshot(str(args.out / name))
                    elif element.endswith("-chart"):  # a chart as drawn (uPlot, in the page), that element alone
                        chart = browser.find_element(By.CSS_SELECTOR, element)
                        browser.execute_script("arguments[0].scrollIntoView()", chart)
                        time.sleep(0.5)
                        chart.screenshot(str(args.out / name))
                    elif element:  # the cut line in the middle of the window
                        mark = browser.find_element(By.CSS_SELECTOR, element)
                        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", mark)
                        time.sleep(0.5)
                        browser.save_screenshot(str(args.out / name))
                    else:
                        height = browser.execute_script("return document.documentElement.scrollHeight")
                        browser.set_window_size(1280, min(max(400, int(height) + 160), 1800))
                        browser.save_screenshot(str(args.out / name))
                    print(args.out / name)
        finally:
            browser.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
