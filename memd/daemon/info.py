"""The daemon's part of ``memd status``: running or not (and since when), the picked dream and check-in
times, the next run of each job, the last run of each job and its outcome, open warnings.

Read from the pid-file lock (live or not), the heartbeat (hung or not) and the state store; the next
runs are computed with the same pure schedule functions the daemon uses, so they are right even
while the daemon is stopped (and say that a missed run will be caught up on start).
"""

from __future__ import annotations

import json
from datetime import datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memd.daemon import pidfile
from memd.daemon import schedule as S

if TYPE_CHECKING:
    from memd.config import Config

STALE_AFTER_S = 180.0  # three missed heartbeats


def _local_tz() -> tzinfo:
    import tzlocal

    return tzlocal.get_localzone()


def _stamp(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def daemon_status(state_dir: Path, config: Config, *, now: datetime | None = None,
                  tz: tzinfo | None = None) -> dict[str, Any]:
    from memd.state import StateStore

    zone = tz or _local_tz()
    t_now = (now or datetime.now().astimezone()).astimezone(zone)
    pid = pidfile.running_pid(state_dir)
    beat = pidfile.read_heartbeat(state_dir) or {}
    hb = beat.get("heartbeat")
    info: dict[str, Any] = {"running": pid is not None, "pid": pid}
    if pid is not None and beat.get("pid") == pid:
        info["since"] = _stamp(beat.get("started"))
        age = t_now.timestamp() - float(hb) if isinstance(hb, (int, float)) else None
        info["heartbeat_age_s"] = None if age is None else round(age)
        info["stale"] = age is None or age > STALE_AFTER_S
        info["watching"] = bool(beat.get("watching"))
        info["running_job"] = beat.get("running_job")
        if isinstance(beat.get("viewer"), dict):  # [ui] serve = true: served, or why not
            info["viewer"] = beat["viewer"]
    elif beat.get("stopped"):
        info["stopped"] = _stamp(beat.get("stopped"))
    jobs: dict[str, Any] = {}
    with StateStore.open(state_dir) as st:
        sch = config.schedule
        rules: dict[str, S.Rule] = {}
        for job, window in (("dream", sch.dream_window), ("checkin", sch.checkin_window)):
            stored = st.get(f"schedule.{job}.pick")
            minute, new = S.pick_minute(window, stored)
            jobs[job] = {"at": S.hhmm(minute) if new is None else None, "window": window}
            if new is None:
                rules[job] = S.Daily(minute, zone)
        jobs["catchup"] = {"cron": sch.catchup_cron}
        rules["catchup"] = S.Cron(sch.catchup_cron, zone)  # a valid crontab: the config checked it
        for job, rule in rules.items():
            last = S.parse_stamp(st.get(f"schedule.{job}.last_slot"))
            if last is None:
                jobs[job]["next"] = rule.next_after(t_now).isoformat(timespec="minutes")
                continue
            due = S.due_slot(rule, last, t_now)
            if due is not None:
                jobs[job]["next"] = "now (missed at " + due.isoformat(timespec="minutes") + ")"
            else:
                jobs[job]["next"] = rule.next_after(max(last, t_now)).isoformat(timespec="minutes")
        for job in ("dream", "catchup", "checkin"):
            raw = st.get(f"job.{job}.last")
            try:
                last_run = json.loads(raw) if raw else None
            except ValueError:
                last_run = None
            if isinstance(last_run, dict):
                last_run["ended"] = _stamp(last_run.get("ended"))
            jobs.setdefault(job, {})["last"] = last_run
        warnings = [{"project": w.project, "kind": w.kind, "level": w.level, "since": _stamp(w.since),
                     **{k: w.details[k] for k in ("lines", "chars", "files", "hidden", "runs", "sessions", "reason")
                        if k in w.details}}
                    for w in st.warnings()]
        from memd.llm.batch import pending

        batches = [{**b.as_json(), "at": _stamp(b.at)} for b in pending(st)]
    info["jobs"] = jobs
    info["batches"] = batches
    info["warnings"] = warnings
    return info


def render(info: dict[str, Any], *, warnings: bool = True) -> str:
    """The daemon's status as text; ``warnings``: with the open warnings it recorded."""
    lines: list[str] = []
    if info["running"]:
        state = f"running (pid {info['pid']}, since {info.get('since') or '?'})"
        if info.get("stale"):
            state += f"; no heartbeat for {info.get('heartbeat_age_s')} s: hung?"
        if info.get("running_job"):
            state += f"; now running: {info['running_job']}"
        if not info.get("watching", True):
            state += "; waiting for the projects folder"
    else:
        state = "not running" + (f" (stopped {info['stopped']})" if info.get("stopped") else "") + \
            " — start it with `memd run` or `memd service install`"
    lines.append(f"daemon: {state}")
    if info["running"] and info.get("viewer"):
        from memd.daemon.viewer import status_line

        lines.append(status_line(info) or "")
    for job in ("dream", "checkin", "catchup"):
        j = info["jobs"].get(job, {})
        when = f"daily at {j['at']}" if j.get("at") else (
            f"cron {j['cron']}" if j.get("cron") else f"a minute in {j.get('window')}, picked on first start")
        last = j.get("last")
        if last:
            counts = ", ".join(f"{k} {v}" for k, v in (last.get("counts") or {}).items()) or "nothing ran"
            last_s = f"last {last.get('ended')}: {counts}" + (" (abandoned)" if last.get("abandoned") else "")
        else:
            last_s = "never run"
        lines.append(f"  {job:<8} {when}; next {j.get('next', '-')}; {last_s}")
    for b in info.get("batches", []):
        lines.append(f"  batch {b['id']} ({b['job']} of {b['project']}, submitted {b.get('at') or '?'}) is pending: "
                     f"the project's next {b['job']} with the same request picks it up")
    if warnings:
        ws = info["warnings"]
        lines.extend([f"open warnings ({len(ws)}):", *warning_lines(ws)] if ws else ["open warnings: none"])
    return "\n".join(lines) + "\n"


def warning_lines(ws: list[dict[str, Any]]) -> list[str]:
    """One indented line per warning the daemon recorded."""
    out: list[str] = []
    for w in ws:
        fig = ", ".join(f"{k} {w[k]}" for k in ("lines", "chars", "files", "hidden", "runs", "sessions") if k in w)
        out.append(f"  {w['project']}: {w['kind']} {w['level']}" + (f" ({fig})" if fig else "")
                   + f" since {w['since']}" + (f": {w['reason']}" if w.get("reason") else ""))
    return out


def status_section(state_dir: Path, config: Config) -> tuple[str, dict[str, Any] | None]:
    """The text ``memd status`` appends under its table (without the warnings, which status measures
    itself) and the daemon's status it was made from (None when it could not be read)."""
    try:
        d = daemon_status(state_dir, config)
    except Exception as e:  # status must never fail because of the daemon's part
        return f"daemon: status unavailable ({type(e).__name__}: {e})\n", None
    return render(d, warnings=False), d
