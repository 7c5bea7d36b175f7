"""The quality eval's stub tier (bench/eval_quality.py): the ideal player scores 100%, the two weak
players clearly lower, and every check can fail."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from memd.jobs import ProjectOutcome

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import eval_quality as ev


@pytest.fixture(scope="module")
def scores() -> dict[str, ev.Score]:
    return {name: ev.score_player(name) for name in ev.PLAYERS}


def test_there_are_at_least_ten_scenarios_over_both_jobs() -> None:
    scs = ev.scenarios()
    assert len(scs) >= 10
    assert {s.job for s in scs} == {"catchup", "dream"}
    assert len({s.name for s in scs}) == len(scs)


def test_the_ideal_player_scores_full_marks(scores: dict[str, ev.Score]) -> None:
    s = scores["ideal"]
    assert s.failures == []
    assert s.share == 1.0 and s.scenarios_passed == s.scenarios


@pytest.mark.parametrize("player", ["nothing", "everything"])
def test_a_weak_player_scores_clearly_lower(scores: dict[str, ev.Score], player: str) -> None:
    s = scores[player]
    assert s.share <= 0.8, s.failures
    assert s.scenarios_passed <= s.scenarios // 4, s.failures


def test_every_model_facing_check_fails_for_some_weak_player(scores: dict[str, ev.Score]) -> None:
    """Each scenario's own checks (what the model controls) are failed by at least one weak player,
    except presence checks that guard against over-deletion."""
    failed = {f for name in ("nothing", "everything") for f in scores[name].failures}
    for sc in ev.scenarios():
        assert any(f.startswith(f"{sc.name}: ") for f in failed), f"no weak player fails {sc.name}"
    for sc in ev.scenarios():
        for label, _ in sc.checks:
            if label.endswith(" present") or " is " in label or label.startswith("fact kept"):
                continue  # what must survive: a deleting run fails them (the test below)
            if label.startswith("memd "):
                continue  # what memd sends, whoever plays: a broken run fails it (the test below)
            assert f"{sc.name}: {label}" in failed, f"{sc.name}: {label} never fails"


def _outcome(tmp_path: Path, sc: ev.Scenario, bodies: list[str]) -> ev.Outcome:
    project = ev.setup(sc, tmp_path / "claude")
    team = ev.snapshot(project.memory_dir / "team")
    return ev.Outcome(project.memory_dir, team, bodies, ProjectOutcome(ev.PROJECT, "changed"))


def _check(sc: ev.Scenario, label: str) -> ev.Check:
    return next(c for c in ev.all_checks(sc) if c[0] == label)


def test_the_memd_facing_checks_fail_on_a_broken_run(tmp_path: Path) -> None:
    """team/ touched, a secret sent or saved, a saved span sent again, index prose dropped, a kept file
    deleted, a type changed:
    each check says so (what no scripted player can do, since memd's guards stop it)."""
    scs = {s.name: s for s in ev.scenarios()}
    sc = scs["secret_in_transcript"]
    o = _outcome(tmp_path / "a", sc, ['{"messages": "' + ev.DB_URL + '"}'])
    assert _check(sc, "team/ byte-identical")[1](o)
    (o.mem / "team" / "release_train.md").write_text("changed\n")
    assert not _check(sc, "team/ byte-identical")[1](o)
    assert not _check(sc, "no secret in any request")[1](o)
    assert _check(sc, "no secret (nor its redaction) saved")[1](o)
    (o.mem / "project_x.md").write_text(f"db: {ev.DB_URL}\n")
    assert not _check(sc, "no secret (nor its redaction) saved")[1](o)

    sc = scs["already_saved"]
    label = "the span the session saved itself not sent"
    assert _check(sc, label)[1](_outcome(tmp_path / "f", sc, ['{"text": "Also, never mock the database"}']))
    assert not _check(sc, label)[1](_outcome(tmp_path / "g", sc, ['{"text": "I prefer pytest over unittest."}']))

    sc = scs["index_over_budget"]
    o = _outcome(tmp_path / "b", sc, [])
    assert _check(sc, "user prose of MEMORY.md kept")[1](o)
    (o.mem / ev.INDEX).write_text("- [Role](user_role.md) — backend engineer\n")
    assert not _check(sc, "user prose of MEMORY.md kept")[1](o)
    assert _check(sc, "index within budget")[1](o)

    sc = scs["correction"]
    o = _outcome(tmp_path / "c", sc, [])
    assert _check(sc, "user_editor.md is user")[1](o)
    (o.mem / "user_editor.md").write_text(ev.topic("Editor", "editor", "Helix.", "project"))
    assert not _check(sc, "user_editor.md is user")[1](o)
    (o.mem / "user_editor.md").unlink()
    assert not _check(sc, "user_editor.md is user")[1](o)

    sc = scs["duplicates"]
    o = _outcome(tmp_path / "e", sc, [])
    label = "fact kept /linter rejects spaces/"
    assert _check(sc, label)[1](o)
    (o.mem / "feedback_tabs_2.md").unlink()
    assert not _check(sc, label)[1](o)

    sc = scs["vague_duplicate"]  # issue 31: the evidence carries both files' text
    label = "memd handed the dream both files' text"
    assert not _check(sc, label)[1](_outcome(tmp_path / "h", sc, ['{"system": "only the manifest"}']))
    assert _check(sc, label)[1](_outcome(tmp_path / "i", sc, [
        '{"system": "Refunds over 500 EUR need a second approver ... The staging database was reset twice."}']))

    sc = scs["prompt_injection"]
    o = _outcome(tmp_path / "d", sc, [])
    assert _check(sc, "user_role.md present")[1](o)
    (o.mem / "user_role.md").unlink()
    assert not _check(sc, "user_role.md present")[1](o)


def test_the_real_tier_prints_its_table(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The --real path end to end, its API pointed at the stub (a model that answers "nothing to save")."""
    from tests.plugins.stub_api import Reply, StubAPI

    with StubAPI() as stub:
        stub.fallback = Reply(body=stub.message(stub.text("Nothing to save.")))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.base_url)
        assert ev.main(["--real", "--repeat", "1"]) == 0
        assert stub.requests, "the real tier sent nothing"
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[2] for line in out.splitlines()[2:] if line.split()[:1] != ["total"]}
    assert set(rows) == {s.name for s in ev.scenarios()}
    assert rows["never_save"] == "1/1" and rows["duplicates"] == "0/1"
    assert "total cost: $" in out


def test_the_real_tier_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(SystemExit, match="ANTHROPIC_API_KEY"):
        ev.main(["--real"])
