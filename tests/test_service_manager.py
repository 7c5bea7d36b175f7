"""The sandboxed unit `memd service install` writes, run by a real systemd user manager (issue 25).

No user bus on the test machines, so the test starts its own manager: ``systemd --user`` in a private
mount namespace (``unshare --mount``) where ``/run/systemd/system`` exists (systemd checks it to see
it "was booted with systemd"), ``/run/systemd/inaccessible`` holds the nodes PID 1 makes at boot (a
sandbox binds them over what it hides: without them ``ProtectKernelTunables`` failed with
226/NAMESPACE), ``/sys/fs/cgroup`` holds only the two controller-less hierarchies (the named
``systemd`` one and ``unified``) and the manager starts in a cgroup of its own under each: it
creates its scopes and slices there and never moves another process (started in the root cgroup it
moved every process of the machine into its ``init.scope``, in every hierarchy). HOME is a tmpfs at
``/srv`` inside that namespace: under ``/tmp`` it would vanish behind the unit's ``PrivateTmp``.

Then, through ``nsenter`` into the namespace: `memd service install` (the namespace tier where the
machine's probe allows it), ``systemctl --user start memd``, and the daemon must be ready under the
sandbox, sync with the system ``git`` to a ``file://`` remote in its writable state folder, and reach
the Messages API stub over HTTPS on loopback (a self-signed CA handed in with ``SSL_CERT_FILE`` in
``~/.config/memd/env``, the file the unit reads). Root only (a user manager for a plain user needs a
delegated cgroup and a login); skipped with the reason where any piece is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memd import layout
from tests.plugins.stub_api import StubAPI

pytestmark = pytest.mark.slow

SYSTEMD = next((p for p in ("/usr/lib/systemd/systemd", "/lib/systemd/systemd") if os.path.exists(p)), None)
HOME = "/srv/home"  # inside the test's mount namespace (a tmpfs)
RUNTIME = "/srv/run"
WAIT_S = 90.0

SETUP = r"""
set -eu
for h in systemd unified; do
  mkdir -p "/sys/fs/cgroup/$h/$CG"
  echo $$ > "/sys/fs/cgroup/$h/$CG/cgroup.procs"
done
mount -t tmpfs -o mode=755 memd-cgroups /sys/fs/cgroup
mkdir /sys/fs/cgroup/systemd /sys/fs/cgroup/unified
mount -t cgroup -o none,name=systemd,xattr cgroup /sys/fs/cgroup/systemd
mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
mkdir -p /run/systemd
mount -t tmpfs -o mode=755 memd-run-systemd /run/systemd
mkdir /run/systemd/system
# what PID 1 makes at boot and a unit's sandbox binds over what it hides (ProtectKernelTunables, ...)
mkdir -m 755 /run/systemd/inaccessible
cd /run/systemd/inaccessible
touch reg && mkdir dir && mkfifo fifo && mknod chr c 0 0 && mknod blk b 0 0
"$PY" -c "import socket; socket.socket(socket.AF_UNIX).bind('sock')"
chmod 0000 reg dir fifo chr blk sock
cd /
mount -t tmpfs -o mode=755 memd-srv /srv
mkdir -m 700 /srv/run
mkdir -p /srv/home/.config
export XDG_RUNTIME_DIR=/srv/run HOME=/srv/home XDG_CONFIG_HOME=/srv/home/.config
exec "$SYSTEMD" --user --log-target=console --log-level=info
"""


def _why_not() -> str | None:
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if os.geteuid() != 0:
        return "needs root (to make the manager's cgroups and mount namespace)"
    if SYSTEMD is None:
        return "no systemd binary"
    for tool in ("unshare", "nsenter", "systemctl", "openssl", "git"):
        if shutil.which(tool) is None:
            return f"no {tool}"
    if not (os.path.isdir("/sys/fs/cgroup/systemd/") and os.path.isdir("/sys/fs/cgroup/unified/")):
        return "this test knows the hybrid cgroup layout only (/sys/fs/cgroup/systemd and /unified)"
    if not os.path.isdir("/srv"):
        return "no /srv to mount the test's HOME on"
    return None


class Manager:
    """A systemd user manager in its own mount namespace; files inside through /proc/<pid>/root."""

    def __init__(self, base: Path) -> None:
        self.cgroup = f"memd-sdtest-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        script = base / "setup.sh"
        script.write_text(SETUP)
        self.log = base / "manager.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "bash", str(script)],
                                         env={**os.environ, "CG": self.cgroup, "SYSTEMD": str(SYSTEMD),
                                              "PY": sys.executable},
                                         stdout=out, stderr=subprocess.STDOUT)
        self.root = Path(f"/proc/{self.proc.pid}/root")
        deadline = time.monotonic() + WAIT_S
        while not self.inside(f"{RUNTIME}/systemd/private").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the user manager did not start: {self.log.read_text(errors='replace')}")
            time.sleep(0.1)

    def inside(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def run(self, *argv: str, timeout: float = WAIT_S) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": HOME, "XDG_RUNTIME_DIR": RUNTIME,
               "XDG_CONFIG_HOME": f"{HOME}/.config", "XDG_STATE_HOME": f"{HOME}/.state", "LANG": "C.UTF-8"}
        return subprocess.run(["nsenter", "-t", str(self.proc.pid), "-m", "--", "env", "-i",
                               *(f"{k}={v}" for k, v in env.items()), *argv],
                              capture_output=True, text=True, timeout=timeout, check=False)

    def diagnose(self) -> str:
        """What a failing step leaves to read: the unit's status and the tail of memd's log."""
        status = self.run("systemctl", "--user", "status", "memd.service", "--no-pager", "-l").stdout
        try:
            log = self.inside(f"{HOME}/.state/memd/memd.log").read_text(errors="replace").splitlines()[-15:]
        except OSError:
            log = ["(no memd.log)"]
        return status + "\n" + "\n".join(log)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.run("systemctl", "--user", "stop", "memd.service", timeout=60)
            self.run("systemctl", "--user", "exit", timeout=30)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        for h in ("systemd", "unified"):  # the manager's cgroups, deepest first (empty once it is gone)
            top = Path("/sys/fs/cgroup") / h / self.cgroup
            for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                _rmdir(d)
            _rmdir(top)


def _rmdir(d: Path) -> None:
    for _ in range(50):
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[Manager]:
    why = _why_not()
    if why:
        pytest.skip(why)
    m = Manager(tmp_path)
    try:
        yield m
    finally:
        m.close()


@pytest.fixture
def https_stub(tmp_path: Path) -> Iterator[tuple[StubAPI, bytes]]:
    """The Messages API stub behind TLS (a self-signed certificate for 127.0.0.1); its PEM."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    stub = StubAPI()
    server = stub._server
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    stub.base_url = stub.base_url.replace("http://", "https://")
    try:
        yield stub, cert.read_bytes()
    finally:
        stub.close()


def _events(m: Manager, name: str, **match: object) -> list[dict[str, object]]:
    try:
        raw = m.inside(f"{HOME}/.state/memd/memd.log").read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    out = []
    for line in raw.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") == name and all(ev.get(k) == v for k, v in match.items()):
            out.append(ev)
    return out


def _wait(m: Manager, name: str, **match: object) -> dict[str, object]:
    deadline = time.monotonic() + WAIT_S
    while True:
        found = _events(m, name, **match)
        if found:
            return found[-1]
        if time.monotonic() > deadline:
            raise AssertionError(f"no {name} {match} within {WAIT_S:.0f} s\n{m.diagnose()}")
        time.sleep(0.2)


def test_the_sandboxed_unit_runs_under_a_user_manager(manager: Manager,
                                                      https_stub: tuple[StubAPI, bytes]) -> None:
    stub, pem = https_stub
    stub.fallback = None
    stub.responder = lambda body: stub.message(stub.text("Nothing to consolidate."))
    home = manager.inside(HOME)
    # a project with a repository (its identity for sync), a finished session, and memory
    repo = f"{HOME}/src/app"
    (manager.inside(repo) / ".git").mkdir(parents=True)
    (manager.inside(repo) / ".git" / "config").write_text('[remote "origin"]\n\turl = git@github.com:me/app.git\n')
    folder = home / ".claude" / "projects" / layout.sanitize(repo)
    (folder / "memory").mkdir(parents=True)
    (folder / "memory" / "MEMORY.md").write_text("# Memory\n- [Deploys](deploys.md) — how we ship\n")
    (folder / "memory" / "deploys.md").write_text(
        "---\nname: Deploys\ndescription: how we ship\ntype: project\n---\n\nBlue-green, Thursdays.\n")
    session = folder / f"{uuid.uuid4()}.jsonl"
    session.write_text(json.dumps({"type": "user", "cwd": repo, "sessionId": session.stem,
                                   "message": {"role": "user", "content": "hi"}}) + "\n")
    past = time.time() - 6 * 3600  # a finished session, memory last touched hours ago
    for p in [*folder.rglob("*")]:
        os.utime(p, (past, past))
    state = f"{HOME}/.state/memd"
    manager.inside(state).mkdir(parents=True)
    remote = f"{state}/remote.git"  # in the state folder: one of the two paths the sandbox leaves writable
    r = manager.run("git", "init", "-q", "--bare", remote)
    assert r.returncode == 0, r.stderr
    cfg = home / ".config" / "memd"
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "config.toml").write_text(f'[sync]\nremote = "file://{remote}"\nmachine = "box"\n')
    (cfg / "ca.pem").write_bytes(pem)
    (cfg / "env").write_text(f"ANTHROPIC_API_KEY=sk-ant-test-key\nANTHROPIC_BASE_URL={stub.base_url}\n"
                             f"SSL_CERT_FILE={HOME}/.config/memd/ca.pem\n")
    (cfg / "env").chmod(0o600)

    python = os.path.join(os.path.dirname(sys.executable), "python3")
    r = manager.run(python if os.path.exists(python) else sys.executable, "-m", "memd", "service", "install")
    assert r.returncode == 0, r.stdout + r.stderr
    unit = manager.inside(f"{HOME}/.config/systemd/user/memd.service").read_text()
    namespaces = "ProtectSystem=strict" in unit
    for args in (("daemon-reload",), ("start", "memd.service")):
        r = manager.run("systemctl", "--user", *args)
        assert r.returncode == 0, (args, r.stdout, r.stderr, manager.diagnose())
    _wait(manager, "daemon.ready")
    r = manager.run("systemctl", "--user", "is-active", "memd.service")
    assert r.stdout.strip() == "active", r.stdout + r.stderr
    shown = manager.run("systemctl", "--user", "show", "memd.service", "-p", "ProtectSystem", "-p", "PrivateTmp",
                        "-p", "NoNewPrivileges", "-p", "Type", "-p", "SubState").stdout
    assert "NoNewPrivileges=yes" in shown and "Type=notify" in shown and "SubState=running" in shown, shown
    if namespaces:  # PrivateTmp only where nothing the daemon needs lies under /tmp (this clone may)
        assert "ProtectSystem=strict" in shown, shown
        assert ("PrivateTmp=yes" in shown) is ("\nPrivateTmp=yes\n" in unit), (shown, unit)

    # git inside the sandbox: a sync pushes this machine's memory to the file:// remote
    r = manager.run(sys.executable, "-m", "memd", "trigger", "sync")
    assert r.returncode == 0, r.stdout + r.stderr
    done = _wait(manager, "job.end", job="sync")
    heads = manager.run("git", "--git-dir", remote, "for-each-ref", "--format=%(refname)").stdout.split()
    assert heads, (done, _events(manager, "job.finish", job="sync"))

    # HTTPS inside the sandbox: the dream's model call reaches the stub through TLS on loopback
    r = manager.run(sys.executable, "-m", "memd", "trigger", "dream", "--project", repo)
    assert r.returncode == 0, r.stdout + r.stderr
    _wait(manager, "job.end", job="dream")
    finish = _events(manager, "job.finish", job="dream")
    assert any(req.path == "/v1/messages" for req in stub.requests), finish
    assert finish and finish[-1]["outcome"] != "failed", finish

    r = manager.run("systemctl", "--user", "stop", "memd.service")
    assert r.returncode == 0, r.stderr
    assert manager.run("systemctl", "--user", "is-active", "memd.service").stdout.strip() == "inactive"
    _wait(manager, "daemon.stop")


def _python_under_tmp() -> Path:
    """A venv under /tmp whose interpreter runs this memd (its site-packages add this one's): what a clone
    under /tmp with its own venv is (issue 34 #6)."""
    venv = Path(tempfile.mkdtemp(prefix="memd-sd-venv-", dir="/tmp"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    ours = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
    (site / "memd-test.pth").write_text("".join(f"import site; site.addsitedir({p!r})\n" for p in ours))
    return venv


def test_a_memd_under_tmp_starts_and_status_tells_a_failed_unit(manager: Manager) -> None:
    """Issue 34 #6: the sandboxed unit always had PrivateTmp=yes, so a memd installed under /tmp failed with
    203/EXEC and `memd service status` said "up to date". Now the unit starts, and a unit that fails (a bad
    config: exit 2, never restarted) is reported as failed, with its exit status, exit 1."""
    venv = _python_under_tmp()
    try:
        python = str(venv / "bin" / "python")
        manager.inside(f"{HOME}/.claude/projects").mkdir(parents=True)
        manager.inside(f"{HOME}/.state/memd").mkdir(parents=True)
        r = manager.run(python, "-m", "memd", "service", "install")
        assert r.returncode == 0, r.stdout + r.stderr
        unit = manager.inside(f"{HOME}/.config/systemd/user/memd.service").read_text()
        assert f"ExecStart={python} " in unit, unit
        if "ProtectSystem=strict" in unit:
            assert "PrivateTmp=yes" not in unit and "warning: PrivateTmp left out" in r.stdout, r.stdout
        for args in (("daemon-reload",), ("start", "memd.service")):
            r = manager.run("systemctl", "--user", *args)
            assert r.returncode == 0, (args, r.stdout, r.stderr, manager.diagnose())
        _wait(manager, "daemon.ready")
        r = manager.run(python, "-m", "memd", "service", "status")
        assert r.returncode == 0 and "unit: active (running)" in r.stdout, r.stdout + r.stderr
        r = manager.run("systemctl", "--user", "stop", "memd.service")
        assert r.returncode == 0, r.stderr

        cfg = manager.inside(f"{HOME}/.config/memd")
        cfg.mkdir(parents=True, exist_ok=True)
        (cfg / "config.toml").write_text("[daemon]\nno_such_key = 1\n")
        manager.run("systemctl", "--user", "start", "memd.service")
        deadline = time.monotonic() + WAIT_S
        while manager.run("systemctl", "--user", "is-failed", "memd.service").stdout.strip() != "failed":
            assert time.monotonic() < deadline, manager.diagnose()
            time.sleep(0.2)
        r = manager.run(python, "-m", "memd", "service", "status")
        assert r.returncode == 1, r.stdout + r.stderr
        assert "unit: failed: exited with status 2: a bad config" in r.stdout, r.stdout
        assert "start it again once fixed: systemctl --user restart memd.service" in r.stdout, r.stdout
    finally:
        shutil.rmtree(venv, ignore_errors=True)
