"""The daemon serves the viewer when configured (``[ui] serve = true``, issue 26): the REAL `memd run`
process, its URL file, its token, `memd status` and `memd ui` beside it, SIGTERM, SIGKILL, a taken port,
no Jinja2, and nothing of the viewer's stack imported while serving is off."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from memd.daemon import viewer
from tests.plugins.daemon import FAST_CONFIG, DaemonProc, over_budget_index

pytest.importorskip("jinja2")
pytestmark = pytest.mark.slow

RunDaemon = Callable[..., DaemonProc]
SERVE = FAST_CONFIG + "[ui]\nserve = true\n"


def _get(port: int, target: str, cookie: str | None = None) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {"Host": f"127.0.0.1:{port}"} | ({"Cookie": cookie} if cookie else {})
        conn.request("GET", target, headers=headers)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def _open_page(url: str) -> tuple[int, str]:
    """The first screen as a browser gets it: the token's redirect sets the cookie, then the page."""
    parts = urlsplit(url)
    assert parts.port is not None
    status, headers, _ = _get(parts.port, f"/?{parts.query}")
    assert status == 303, status
    cookie = headers["set-cookie"].split(";", 1)[0]
    status, _, body = _get(parts.port, headers["location"], cookie)
    return status, body


def _port_closed(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) != 0


def _imports(stderr: str) -> set[str]:
    """The modules a process imported, from its ``-X importtime`` lines on stderr."""
    out = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            out.add(line.rsplit("|", 1)[1].strip())
    return out


def test_the_daemon_serves_the_viewer_with_its_token_and_stops_it_on_sigterm(run_daemon: RunDaemon) -> None:
    d = run_daemon(SERVE, start=False)
    d.write_memory("-home-u-app", "MEMORY.md", over_budget_index(12))
    d.env["PYTHONPROFILEIMPORTTIME"] = "1"
    d.start()
    served = d.wait_for("ui.served")
    path = d.state_dir / "ui-url.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    rec = json.loads(path.read_text())
    assert rec["pid"] == d.proc.pid and rec["port"] == served["port"]  # type: ignore[union-attr]
    url, port = rec["url"], rec["port"]
    token = urlsplit(url).query.removeprefix("token=")
    assert len(token) >= 32
    # with the token: the first screen, with the project
    status, body = _open_page(url)
    assert status == 200 and "-home-u-app" in body
    # its actions are the CLI's too: a POST to one reaches the action's checks (no CSRF token: refused,
    # 403), where a viewer without actions answers 405 to every POST
    cookie = f"memd_ui_token_{port}={token}"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/retry/-home-u-app", body=b"csrf=wrong", headers={
            "Host": f"127.0.0.1:{port}", "Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded",
            "Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin"})
        r = conn.getresponse()
        assert r.status == 403 and "CSRF" in r.read().decode(), r.status
    finally:
        conn.close()
    # without it, or with a wrong one: refused
    assert _get(port, "/")[0] == 403
    assert _get(port, "/?token=" + "x" * len(token))[0] == 403
    # the token is never in the log; memd status names the viewer without it
    assert token not in d.log_path.read_text()
    st = d.memd("status")
    assert f"viewer: http://127.0.0.1:{port}/" in st.stdout and token not in st.stdout
    doc = json.loads(d.memd("status", "--format", "json").stdout)
    assert doc["daemon"]["viewer"] == {"served": True, "port": port}
    # `memd ui` prints the daemon's URL instead of starting a second server
    ui = d.memd("ui", timeout=30)
    assert ui.returncode == 0 and url in ui.stdout and "served by the running daemon" in ui.stdout
    # `memd ui --open` opens it (webbrowser runs $BROWSER) through a 0600 page that leads to the URL: the
    # token is never on the browser's command line (memd.ui.opener, tests/test_ui_security.py)
    opened = d.base / "opened.txt"
    opener = d.base / "opener.py"
    opener.write_text(f"import sys, pathlib; pathlib.Path({str(opened)!r}).write_text(sys.argv[1])\n")
    d.env["BROWSER"] = f"{sys.executable} {opener} %s"
    ui = d.memd("ui", "--open", timeout=30)
    assert ui.returncode == 0 and url in ui.stdout
    given = opened.read_text()
    assert token not in given and given.startswith("file://")
    page = Path(given.removeprefix("file://"))
    assert url in page.read_text() and page.stat().st_mode & 0o777 == 0o600
    # SIGTERM stops both: the daemon exits 0, the port is closed, the URL file is gone
    assert d.stop() == 0
    assert _port_closed(port)
    assert not path.exists()
    d.wait_for("ui.stopped", port=port)
    assert {"jinja2", "memd.ui.server"} <= _imports(d.stderr())


def test_serving_off_imports_nothing_of_the_viewer(run_daemon: RunDaemon) -> None:
    d = run_daemon(start=False)
    d.env["PYTHONPROFILEIMPORTTIME"] = "1"
    d.start()
    d.wait_for("daemon.ready")
    d.write_memory("-p", "MEMORY.md", over_budget_index(230))
    d.wait_for("budget.warning", project="-p")  # the daemon has done its work
    assert d.stop() == 0
    got = _imports(d.stderr())
    assert "memd.daemon.server" in got  # the import log is there
    assert not got & {"jinja2", "markupsafe", "http.server", "socketserver", "memd.ui", "memd.ui.server",
                      "memd.ui.service", "memd.ui.views", "memd.commands.ui"}
    assert not (d.state_dir / "ui-url.json").exists()
    assert "viewer" not in d.memd("status").stdout


def test_a_taken_port_leaves_the_daemon_running_and_status_says_why(run_daemon: RunDaemon) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        d = run_daemon(SERVE + f"port = {port}\n")
        ev = d.wait_for("ui.not_served")
        assert f"port {port} on 127.0.0.1 is taken" in ev["reason"]
        d.wait_for("daemon.ready")
        # the daemon does its work all the same
        d.write_memory("-p", "MEMORY.md", over_budget_index(230))
        d.wait_for("budget.warning", project="-p")
        st = d.memd("status").stdout
        assert f"viewer: not served: port {port} on 127.0.0.1 is taken" in st
        assert not (d.state_dir / "ui-url.json").exists()
        assert viewer.live_url(d.state_dir) is None
        assert d.stop() == 0


def test_without_jinja2_the_daemon_runs_and_says_so(run_daemon: RunDaemon, tmp_path: Path) -> None:
    shim = tmp_path / "nojinja"
    shim.mkdir()
    (shim / "jinja2.py").write_text("raise ImportError('no jinja2 here')\n")
    d = run_daemon(SERVE, start=False)
    d.env["PYTHONPATH"] = f"{shim}{os.pathsep}{d.env['PYTHONPATH']}"
    d.start()
    ev = d.wait_for("ui.not_served")
    # the distribution's own name (PyPI's `memd` is another project) and the clone's form
    assert "pip install 'memd-claude[ui]'" in ev["reason"] and "pip install '.[ui]'" in ev["reason"]
    d.wait_for("daemon.ready")
    assert "viewer: not served: Jinja2 is not installed" in d.memd("status").stdout
    assert d.stop() == 0


def test_a_url_file_left_by_a_killed_daemon_is_not_believed(run_daemon: RunDaemon) -> None:
    d = run_daemon(SERVE)
    d.wait_for("ui.served")
    path = d.state_dir / "ui-url.json"
    rec = json.loads(path.read_text())
    assert viewer.live_url(d.state_dir) == rec["url"]
    # the live daemon's pid and port, but not its token: not believed (the port must answer the token)
    forged = dict(rec, url=f"http://127.0.0.1:{rec['port']}/?token=forged")
    path.write_text(json.dumps(forged))
    assert viewer.live_url(d.state_dir) is None
    path.write_text(json.dumps(rec))
    d.signal(signal.SIGKILL)
    d.wait_exit()
    assert path.exists()  # a crash leaves it behind...
    assert viewer.live_url(d.state_dir) is None  # ...and no one is sent there
    # a new start replaces it with its own
    d.start()
    d.wait_for("ui.served", count=2)
    new = json.loads(path.read_text())
    assert new["pid"] == d.proc.pid and new["url"] != rec["url"]  # type: ignore[union-attr]
    assert viewer.live_url(d.state_dir) == new["url"]
    assert d.stop() == 0


def test_the_ui_section_is_checked_with_the_others() -> None:
    from memd import config
    from memd.errors import ConfigError

    assert config.Config().ui.serve is False and config.Config().ui.port == 0
    with pytest.raises(ConfigError) as e:
        config.from_mapping({"ui": {"serve": "yes", "port": 70000, "bind": "0.0.0.0"}})
    text = "\n".join(e.value.problems)
    assert "ui.serve: expected true or false" in text and "ui.port: must be at most 65535" in text
    assert "ui.bind" in text  # an unknown key is said, not ignored


def test_sighup_turns_serving_on_and_off(run_daemon: RunDaemon) -> None:
    d = run_daemon()
    d.wait_for("daemon.ready")
    assert viewer.live_url(d.state_dir) is None
    d.write_config(SERVE)
    d.signal(signal.SIGHUP)
    served = d.wait_for("ui.served")
    assert viewer.live_url(d.state_dir) is not None
    d.write_config(FAST_CONFIG)
    d.signal(signal.SIGHUP)
    d.wait_for("ui.stopped", port=served["port"])
    assert _port_closed(served["port"]) and not (d.state_dir / "ui-url.json").exists()
    assert d.stop() == 0
