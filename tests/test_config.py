"""The config schema: config.example.toml documents and validates; errors are reported all at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memd import config
from memd.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "config.example.toml"
HEADER = """\
# memd configuration: every key with its description and default.
# Copy to ~/.config/memd/config.toml (or pass --config FILE) and keep only the keys you change.
# Generated from the schema in memd/config.py (config.render_toml); tests/test_config.py checks
# that every key of the schema is documented here and that this file is valid.
# Regenerate: MEMD_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_config.py

"""


def test_example_documents_every_key_and_is_valid() -> None:
    if os.environ.get("MEMD_UPDATE_GOLDEN") == "1":
        EXAMPLE.write_text(HEADER + config.render_toml(config.Config()), encoding="utf-8")
    text = EXAMPLE.read_text(encoding="utf-8")
    assert config.load(EXAMPLE) == config.Config()
    section = ""
    seen: set[str] = set()
    for line in text.splitlines():
        if line.startswith("[") and not line.startswith("[["):
            section = line.strip("[]").split(".", 1)[0]
        elif "=" in line and not line.startswith("#"):
            seen.add(f"{section}.{line.split('=', 1)[0].strip()}")
    missing = []
    for info in config.schema():
        _sect, _name = info.path.split(".", 1)
        if isinstance(info.default, dict):
            # a table of tables ([model.prices."name"]) or of strings ([sync.identities]), with its description
            if (f"[{info.path}." not in text and f"[{info.path}]" not in text) or info.doc not in text:
                missing.append(info.path)
        elif info.path not in seen or info.doc not in text:
            missing.append(info.path)
    assert not missing, f"not documented in config.example.toml: {missing} (MEMD_UPDATE_GOLDEN=1 regenerates it)"


def test_all_errors_at_once_with_key_paths() -> None:
    with pytest.raises(ConfigError) as e:
        config.from_mapping({
            "budget": {"max_lines": "many", "warn_ratio": 2.0, "bogus": 1},
            "dream": {"apply": "sometimes", "require_idle": "yes"},
            "nosuch": {},
            "logging": "loud",
        })
    problems = e.value.problems
    for needle in ("budget.max_lines: expected an integer", "budget.warn_ratio: must be at most",
                   "budget.bogus: unknown key", "dream.apply: expected one of", "dream.require_idle: expected true",
                   "nosuch: unknown section", "logging: expected a table"):
        assert any(p.startswith(needle) for p in problems), (needle, problems)
    assert len(problems) == 7


@pytest.mark.parametrize(("toml", "needle"), [
    ("[budget]\nmax_chars = true\n", "budget.max_chars: expected an integer"),
    ("[budget]\nmax_lines = 0\n", "budget.max_lines: must be at least 1"),
    ("[hooks]\nrecall = 1\n", "hooks.recall: expected true or false"),
    ("[model]\nmax_tokens = 1.5\n", "model.max_tokens: expected an integer"),
    ("[model.prices.m]\ninput = -1\noutput = 1\ncache_write = 1\ncache_read = 1\n", "model.prices.m.input"),
    ("budget = 3\n", "budget: expected a table"),
    ("[budget\n", "not valid TOML"),
])
def test_bad_types_and_syntax(tmp_path: Path, toml: str, needle: str) -> None:
    p = tmp_path / "c.toml"
    p.write_text(toml)
    with pytest.raises(ConfigError) as e:
        config.load(p)
    assert needle in str(e.value)


def memd(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    return subprocess.run([sys.executable, "-m", "memd", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=60, check=False)


def test_config_commands(tmp_path: Path) -> None:
    ok = memd("config", "validate", str(EXAMPLE), home=tmp_path)
    assert ok.returncode == 0 and "valid" in ok.stdout
    none = memd("config", "validate", home=tmp_path)
    assert none.returncode == 0 and "defaults apply" in none.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text("[budget]\nmax_lines = 'x'\nnope = 1\n")
    r = memd("config", "validate", str(bad), home=tmp_path)
    assert r.returncode == 2 and "budget.max_lines" in r.stderr and "budget.nope: unknown key" in r.stderr
    cfg = tmp_path / "c.toml"
    cfg.write_text("[budget]\nmax_lines = 150\n")
    show = memd("config", "show", "--config", str(cfg), home=tmp_path)
    assert show.returncode == 0 and "max_lines = 150" in show.stdout and "# Lines of MEMORY.md" in show.stdout
    assert config.from_mapping(__import__("tomllib").loads(show.stdout)).budget.max_lines == 150
    bare = memd("--config", str(cfg), "config", "show", "--bare", home=tmp_path)
    assert "#" not in bare.stdout and "max_lines = 150" in bare.stdout


def test_the_budget_section_is_the_cores_value() -> None:
    """The core is given its budgets as a plain value; the config builds that very value, checked and
    documented from the same field declarations."""
    from memd.core.budget import Limits
    from memd.core.files import FolderSnapshot
    from memd.core.lint import lint

    assert config.BudgetConfig is Limits and config.Config().budget == Limits()
    built = config.from_mapping({"budget": {"max_lines": 3}}).budget
    assert type(built) is Limits and built.max_lines == 3
    docs = {i.path: i for i in config.schema() if i.path.startswith("budget.")}
    assert docs["budget.max_lines"].doc.startswith("Lines of MEMORY.md") and docs["budget.max_lines"].min == 1
    assert {f.name for f in config.fields(Limits)} == {p.removeprefix("budget.") for p in docs}
    snap = FolderSnapshot.from_texts({"MEMORY.md": "".join(f"- [e{i}](e{i}.md) — x\n" for i in range(5))})
    assert "MEM001" in {f.code for f in lint(snap, built)}  # the limit given is the limit used
    assert "MEM001" not in {f.code for f in lint(snap, config.Config().budget)}


def test_validate_suggests_the_nearest_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        config.from_mapping({"budget": {"warn_ration": 0.7}, "schedul": {}})
    assert "budget.warn_ration: unknown key (did you mean warn_ratio?)" in e.value.problems
    assert any(p.startswith("schedul: unknown section (did you mean schedule?)") for p in e.value.problems)
    with pytest.raises(ConfigError) as e:
        config.from_mapping({"budget": {"zzzz": 1}})
    assert e.value.problems == ["budget.zzzz: unknown key"]  # nothing near: no guess
    bad = tmp_path / "bad.toml"
    bad.write_text("[budget]\nwarn_ration = 0.7\n")
    r = memd("config", "validate", str(bad), home=tmp_path)
    assert r.returncode == 2 and "did you mean warn_ratio?" in r.stderr


def test_show_marks_the_values_the_file_sets(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[budget]\nmax_lines = 150\n[schedule]\ncatchup_cron = \"0 9 * * 1\"\n")
    out = memd("--config", str(cfg), "config", "show", home=tmp_path).stdout
    assert f"max_lines = 150  # set in {cfg}" in out.splitlines()
    assert f'catchup_cron = "0 9 * * 1"  # set in {cfg}' in out.splitlines()
    assert "max_chars = 25000" in out.splitlines()  # a default: unmarked
    assert sum("# set in" in line for line in out.splitlines()) == 2
    assert config.from_mapping(__import__("tomllib").loads(out)).budget.max_lines == 150
    assert "set in" not in memd("config", "show", home=tmp_path).stdout.replace("sets nothing", "")


def test_a_bad_config_loads_tolerantly_with_its_valid_keys(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[budget]\nmax_lines = 150\nmax_chars = 'x'\n[schedule]\ncatchup_cron = '0 0 31 2 *'\n"
                   "[paths]\nstate_dir = '/tmp/s'\n")
    cfg, err = config.load_tolerant(bad)
    assert err is not None and any("budget.max_chars" in p for p in err.problems)
    assert any("schedule.catchup_cron" in p for p in err.problems)
    assert cfg.budget.max_lines == 150 and cfg.budget.max_chars == 25_000 and cfg.paths.state_dir == "/tmp/s"
    assert cfg.schedule.catchup_cron == "0 */2 * * *"  # a cross-check failure falls back to the default
    broken = tmp_path / "broken.toml"
    broken.write_text("[budget\n")
    cfg, err = config.load_tolerant(broken)
    assert cfg == config.Config() and err is not None and "not valid TOML" in str(err)
    assert config.load_tolerant(tmp_path / "missing.toml")[1] is not None
