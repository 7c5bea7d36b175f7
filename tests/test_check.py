"""`memd check`, `memd rebuild` and `memd status` through the real CLI, and the real memory folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memd.config import BudgetConfig
from memd.core.lint import lint
from memd.memfolder.folder import read_folder
from tests.plugins.memory_folders import ROOT, topic

Run = Callable[..., Any]

CLEAN = {
    "MEMORY.md": "# Memory\n\n## User\n- [License](user_license.md) — Apache 2.0, never MIT\n",
    "user_license.md": topic("License", "Always Apache 2.0, never MIT", "user"),
}
BROKEN = {
    "MEMORY.md": "# Memory\n\n- [Gone](gone.md) — deleted\n- [Ok](ok.md) — fine\n",
    "ok.md": topic("Ok", "fine", "user"),
    "binary.md": b"\x00\xff\xfe\x00",
    "bad_yaml.md": "---\nname: [\n---\nx\n",
    "bomb.md": "---\na: &a [x, x]\nb: [*a, *a]\n---\n",
}


def test_clean_folder_exits_0(make_project: Callable[..., Path], memd_cli: Run) -> None:
    make_project("-home-u-clean", CLEAN)
    r = memd_cli("check", "-home-u-clean")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1 memory folder checked: no findings"


def test_errors_exit_1_and_json_has_the_contract(make_project: Callable[..., Path], memd_cli: Run) -> None:
    mem = make_project("-home-u-broken", BROKEN)
    r = memd_cli("check", "-home-u-broken", "--format", "json")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    doc = json.loads(r.stdout)
    assert [p["project"] for p in doc] == ["-home-u-broken"]
    p = doc[0]
    assert p["memory_dir"] == str(mem)
    assert p["budget"] == {"lines": 4, "chars": p["budget"]["chars"], "max_lines": 200, "max_chars": 25000,
                           "hidden_entries": 0}
    for f in p["findings"]:
        assert set(f) == {"code", "severity", "path", "line", "col", "fixable", "message"}
    got = {(f["code"], f["path"], f["severity"]) for f in p["findings"]}
    assert {("MEM005", "MEMORY.md", "error"), ("MEM060", "binary.md", "error"),
            ("MEM022", "bad_yaml.md", "warning"), ("MEM022", "bomb.md", "warning")} <= got
    text = memd_cli("check", str(mem))
    assert text.returncode == 1 and f"{mem}/MEMORY.md:3:10: MEM005 [*] error: link to gone.md" in text.stdout


def test_all_without_a_claude_folder_says_so(tmp_path: Path, memd_cli: Run) -> None:
    # no Claude folder yet where memd looks by default: friendly (issue 13: an explicit one is an error)
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(tmp_path / "no-such-claude")}
    for fmt, out in (("text", None), ("json", [])):
        r = subprocess.run([sys.executable, "-m", "memd", "check", "--all", "--format", fmt], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == 0 and "no Claude Code folder" in (r.stdout if out is None else r.stderr)
        assert out is None or json.loads(r.stdout) == out
    r = memd_cli("check", "--all", claude=tmp_path / "no-such-claude")
    assert r.returncode == 2 and "no Claude Code folder at" in r.stderr and "(given by --claude-dir)" in r.stderr


def test_all_skips_projects_without_memory_and_notes_disabled_memory(
        make_project: Callable[..., Path], memd_cli: Run, claude_home: Path) -> None:
    make_project("-home-u-clean", CLEAN)
    make_project("-home-u-nomem", memory=False)
    r = memd_cli("check", "--all")
    assert r.returncode == 0 and "1 memory folder checked (1 project without memory skipped)" in r.stdout
    (claude_home / "settings.json").write_text('{"autoMemoryEnabled": false}')
    r = memd_cli("check", "--all")
    assert r.returncode == 0 and "auto memory is off" in r.stdout
    r = memd_cli("check", "--all", env={"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"})
    assert "CLAUDE_CODE_DISABLE_AUTO_MEMORY" in r.stdout
    named = memd_cli("check", "-home-u-nomem", "--format", "json")
    assert named.returncode == 0 and json.loads(named.stdout)[0]["findings"] == []


def test_usage_and_config_errors_exit_2(memd_cli: Run, tmp_path: Path, make_project: Callable[..., Path]) -> None:
    make_project("-home-u-clean", CLEAN)
    assert memd_cli("check", "--format", "xml").returncode == 2
    assert memd_cli("check", "-home-u-clean", "--all").returncode == 2
    assert memd_cli("check", str(tmp_path / "nowhere")).returncode == 2
    bad = tmp_path / "bad.toml"
    bad.write_text("[budget]\nmax_lines = 'many'\n")
    r = memd_cli("--config", str(bad), "check", "-home-u-clean")
    assert r.returncode == 2 and "budget.max_lines" in r.stderr and "Traceback" not in r.stderr


def test_budget_from_config_is_used(memd_cli: Run, tmp_path: Path, make_project: Callable[..., Path]) -> None:
    make_project("-home-u-clean", CLEAN)
    cfg = tmp_path / "c.toml"
    cfg.write_text("[budget]\nmax_lines = 3\n")
    r = memd_cli("--config", str(cfg), "check", "-home-u-clean", "--format", "json")
    doc = json.loads(r.stdout)[0]
    assert r.returncode == 1 and doc["budget"]["max_lines"] == 3 and doc["budget"]["hidden_entries"] == 1


def test_rebuild_cli_diff_then_write(make_project: Callable[..., Path], memd_cli: Run) -> None:
    mem = make_project("-home-u-broken", {k: v for k, v in BROKEN.items() if k in ("MEMORY.md", "ok.md")})
    before = (mem / "MEMORY.md").read_text()
    dry = memd_cli("rebuild", "-home-u-broken", "--dry-run")
    assert dry.returncode == 0 and "-- [Gone](gone.md) — deleted" in dry.stdout
    assert (mem / "MEMORY.md").read_text() == before
    wet = memd_cli("rebuild", "-home-u-broken")
    assert wet.returncode == 0 and "MEMORY.md written (snapshot:" in wet.stdout
    assert "gone.md" not in (mem / "MEMORY.md").read_text()
    again = memd_cli("rebuild", "-home-u-broken")
    assert again.returncode == 0 and "already in order" in again.stdout


def test_status_rows(make_project: Callable[..., Path], memd_cli: Run, claude_home: Path) -> None:
    make_project("-home-u-broken", BROKEN)
    make_project("-home-u-nomem", memory=False)
    (claude_home / "projects" / "-home-u-nomem" / "0b3e6441-62e3-4b41-8a0c-9d252f531f7a.jsonl").write_text("{}\n")
    r = memd_cli("status", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    rows = {row["project"]: row for row in doc["projects"]}
    assert doc["daemon"]["running"] is False and set(doc["daemon"]["jobs"]) == {"dream", "checkin", "catchup"}
    assert doc["daemon"]["warnings"] == []
    assert rows["-home-u-broken"]["topic_files"] == 4 and rows["-home-u-broken"]["findings"]["error"] >= 2
    assert rows["-home-u-broken"]["index"]["max_lines"] == 200 and rows["-home-u-broken"]["last_session"] is None
    assert not rows["-home-u-nomem"]["has_memory"] and rows["-home-u-nomem"]["last_session"].endswith("Z")
    text = memd_cli("status")
    assert "PROJECT" in text.stdout and "no memory" in text.stdout


# --------------------------------------------------------------------------- conformance

EXPECTED_PIPELINE = Counter({"MEM004": 39, "MEM022": 3, "MEM040": 2, "MEM041": 7})


def test_real_memory_folders(claude_data: Path) -> None:
    projects = claude_data / "projects"
    stuff = read_folder(projects / "-home-dev-my-claude-stuff" / "memory", BudgetConfig())
    assert len(stuff.files) == 15 and lint(stuff) == []
    pipe = read_folder(projects / "-home-dev-application-pipeline" / "memory", BudgetConfig())
    found = lint(pipe)
    assert Counter(f.code for f in found) == EXPECTED_PIPELINE
    assert not any(f.severity == "error" for f in found)
    by_code = {c: sorted((f.path, f.line) for f in found if f.code == c) for c in EXPECTED_PIPELINE}
    assert by_code["MEM022"] == [("feedback_cover_letter_quality.md", 3),
                                 ("project_dustin_dipaulo_ventures_2026-03-24.md", 3),
                                 ("project_session_2026-03-15.md", 3)]
    assert by_code["MEM040"] == [("feedback_building_for_others.md", 3), ("feedback_building_for_others.md", 9)]
    assert by_code["MEM041"] == [
        ("project_maddie_ventures_2026-03-24.md", 23), ("project_maddie_ventures_2026-03-24.md", 54),
        ("project_pillar3_full_network_2026-03-24.md", 9), ("project_session_2026-03-17.md", 56),
        ("project_session_2026-03-25.md", 45), ("project_session_2026-03-31-s45.md", 63),
        ("project_weekly_rhythm_2026-03-24.md", 42)]
    assert by_code["MEM004"][0] == ("MEMORY.md", 31)


def test_real_folders_through_the_cli(claude_data: Path, memd_cli: Run) -> None:
    r = memd_cli("check", "--all", "--format", "json", claude=claude_data)
    assert r.returncode == 0, r.stderr
    doc = {p["project"]: p for p in json.loads(r.stdout)}
    assert sorted(doc) == ["-home-dev-application-pipeline", "-home-dev-my-claude-stuff"]
    assert doc["-home-dev-application-pipeline"]["budget"]["lines"] == 116
    assert doc["-home-dev-my-claude-stuff"]["findings"] == []
    dry = memd_cli("rebuild", "--all", "--dry-run", claude=claude_data)
    assert dry.returncode == 0 and dry.stdout.count("shortened entry") == 38
    assert os.listdir(claude_data / "projects" / "-home-dev-my-claude-stuff" / "memory")


# --------------------------------------------------------------------------- the result cache


def _age(folder: Path, seconds: float = 60) -> None:
    past = __import__("time").time() - seconds
    for p in folder.rglob("*"):
        os.utime(p, (past, past), follow_symlinks=False)


def test_unchanged_folders_reuse_their_result(tmp_path: Path) -> None:
    from memd import checkcache
    from memd.inspect import check_project
    from memd.layout import Project
    from tests.plugins.memory_folders import write_tree

    mem = write_tree(tmp_path / "p" / "memory", {k: v for k, v in BROKEN.items() if k in ("MEMORY.md", "ok.md")})
    project, state, b = Project("-p", mem.parent, mem), tmp_path / "state", BudgetConfig()
    fresh = check_project(project, b, cache_dir=state)
    assert [f.code for f in fresh.findings] == ["MEM005"]
    assert not list(state.rglob("*.json")), "files written within two seconds are not cached"
    _age(mem)
    check_project(project, b, cache_dir=state)
    (cache_file,) = state.rglob("*.json")
    data = json.loads(cache_file.read_text())
    data["folders"][str(mem)]["result"]["findings"][0]["message"] = "from the cache"
    cache_file.write_text(json.dumps(data))
    checkcache._OPEN.clear()  # as a new process would read it
    assert check_project(project, b, cache_dir=state).findings[0].message == "from the cache"
    assert check_project(project, b).findings[0].message != "from the cache"  # no cache_dir: afresh
    assert check_project(project, BudgetConfig(max_lines=2), cache_dir=state).findings[0].message != \
        "from the cache"  # another budget is another key
    (mem / "MEMORY.md").write_text("# Memory\n\n- [Ok](ok.md) — fine\n")
    assert check_project(project, b, cache_dir=state).findings == []  # a changed file is checked again
    cache_file.write_text("not json")
    checkcache._OPEN.clear()
    key, hit = checkcache.lookup(state, mem, b, True)
    assert key is not None and hit is None


def test_cli_no_cache_flag(make_project: Callable[..., Path], memd_cli: Run) -> None:
    mem = make_project("-home-u-broken", {k: v for k, v in BROKEN.items() if k in ("MEMORY.md", "ok.md")})
    _age(mem)
    assert memd_cli("check", "-home-u-broken").returncode == 1
    (cache_file,) = (Path(os.environ["XDG_STATE_HOME"]) / "memd" / "cache").rglob("*.json")
    data = json.loads(cache_file.read_text())
    (entry,) = data["folders"].values()
    entry["result"]["findings"][0]["message"] = "from the cache"
    cache_file.write_text(json.dumps(data))
    assert "from the cache" in memd_cli("check", "-home-u-broken").stdout
    fresh = memd_cli("check", "-home-u-broken", "--no-cache")
    assert fresh.returncode == 1 and "from the cache" not in fresh.stdout


def test_cache_key_covers_every_module_of_the_check(tmp_path: Path) -> None:
    import subprocess
    import sys

    import memd
    from memd import checkcache
    from tests.plugins.memory_folders import write_tree

    mem = write_tree(tmp_path / "memory", {**{k: v for k, v in BROKEN.items() if isinstance(v, str)},
                                           "dates.md": topic("D", "d", "user", "Done yesterday.\n")})
    code = ("import sys; from pathlib import Path; from memd.memfolder.folder import read_folder; "
            "from memd.core.lint import lint; lint(read_folder(Path(sys.argv[1]))); "
            "print('\\n'.join(m for m in sys.modules if m.startswith('memd.')))")
    out = subprocess.run([sys.executable, "-c", code, str(mem)], capture_output=True, text=True, check=True).stdout
    used = {m.removeprefix("memd.").replace(".", "/") + ".py" for m in out.split()}
    used -= {"core.py", "core/__init__.py", "errors.py"}
    # the linter's own modules (what memd.config itself imports is its owners' business)
    used = {u for u in used if (Path(memd.__file__).parent / u).exists() and (
        u.startswith(("core/", "memfolder/")) or u in ("store.py", "checkcache.py"))}
    assert used <= set(checkcache._MODULES), f"missing from the cache key: {used - set(checkcache._MODULES)}"
    assert all((Path(memd.__file__).parent / m).exists() for m in checkcache._MODULES)


def _modules_after_check(claude: Path, project: str, state: Path) -> set[str]:
    import subprocess
    import sys

    code = ("import sys, io; from memd.cli import main; sys.stdout = io.StringIO(); "
            f"main(['--claude-dir', {str(claude)!r}, 'check', {project!r}]); "
            "sys.stdout = sys.__stdout__; print('\\n'.join(sys.modules))")
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return set(out.stdout.split())


def test_light_imports(make_project: Callable[..., Path], claude_home: Path, tmp_path: Path) -> None:
    mem = make_project("-home-u-clean", CLEAN)
    _age(mem)
    cold = _modules_after_check(claude_home, "-home-u-clean", tmp_path / "state")
    assert "yaml" not in cold, "plain flat frontmatter must not need PyYAML"
    assert "memd.core.lint" in cold
    warm = _modules_after_check(claude_home, "-home-u-clean", tmp_path / "state")
    assert not {"memd.core.lint", "memd.core.secrets", "memd.core.frontmatter", "yaml"} & warm, \
        "an unchanged folder is answered from the cache without loading the linter"
