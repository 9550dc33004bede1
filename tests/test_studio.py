"""``privsyn studio``: the dashboard served with the project's settings wherever it is installed.

The fast tests check the settings (one mapping, the same as ``.streamlit/config.toml``), the
refusals (address beyond loopback without the opt-in, bad or taken port) and the packaging
(every package in the wheel, no absolute ``dashboard`` import left). The end-to-end test does
what a new user does: it builds the wheel, installs it into a fresh virtual environment (the
heavy dependencies come from this test's environment through a ``.pth`` path, so nothing is
downloaded), starts ``privsyn studio`` from an empty folder with an audit hook recording every
socket the server process binds, connects or resolves, and runs the bundled sample in Chromium.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT

from dashboard import launch
from privsyn_core.cli import main

CHROMIUM = "/usr/bin/chromium"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _flatten(table: dict, prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def test_config_toml_holds_the_launchers_settings():
    config = _flatten(tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text()))
    assert config == dict(launch.SERVER_SETTINGS)


def test_the_defaults_serve_loopback_without_statistics():
    flags = launch.streamlit_flags(launch.studio_settings(8501, "127.0.0.1", False))
    pairs = dict(zip(flags[::2], flags[1::2], strict=True))
    assert pairs["--server.address"] == "127.0.0.1"
    assert pairs["--browser.gatherUsageStats"] == "false"
    assert pairs["--server.headless"] == "true"
    assert pairs["--server.enableXsrfProtection"] == "true"
    assert pairs["--server.fileWatcherType"] == "none"
    # a full garbage collection after every script and fragment run took over half of a
    # ten-session server's time (tests/test_dashboard_soak.py: 450 s against 60 s); the
    # worker collects once per run instead
    assert pairs["--runner.postScriptGC"] == "false"
    assert pairs["--server.port"] == "8501"
    assert "--browser.serverAddress" not in pairs


@pytest.mark.parametrize("address", ["0.0.0.0", "::", "192.168.1.20", "example.org", "[::]"])
def test_an_address_beyond_loopback_needs_the_opt_in(address, capsys):
    assert main(["studio", "--address", address, "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--allow-remote" in err, err


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_addresses_need_no_opt_in(address):
    assert launch.studio_settings(9000, address, False)["server.address"] == address


def test_the_opt_in_names_the_address_for_browsers_and_warns():
    settings = launch.studio_settings(9000, "0.0.0.0", True)
    assert settings["server.address"] == "0.0.0.0"
    # a manually set server address for the browsers: Streamlit then detects no IP addresses
    assert settings["browser.serverAddress"] == socket.gethostname()
    assert launch.studio_settings(9000, "10.1.2.3", True)["browser.serverAddress"] == "10.1.2.3"
    warning = launch.remote_warning(settings)
    assert "WARNING" in warning and "beyond this machine" in warning and "no login" in warning


@pytest.mark.parametrize("port", ["0", "65536", "-1", "http", "80.5"])
def test_a_bad_port_is_one_line(port, capsys):
    assert main(["studio", "--port", port, "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--port" in err, err


def test_a_port_in_use_is_one_line(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["studio", "--port", str(port), "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"port {port} on 127.0.0.1 is in use" in err, err


@pytest.mark.slow
def test_the_browser_opens_once_the_server_answers_and_only_on_a_desktop(monkeypatch):
    import http.server
    import threading
    import webbrowser

    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", opened.append)
    # a proxy that refuses everything (loopback port 9): the health check must not use it
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    with http.server.HTTPServer(("127.0.0.1", 0), Health) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}"
        monkeypatch.delenv("DISPLAY", raising=False)
        monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
        launch._open_browser_when_up(url)  # a bare terminal: nothing
        monkeypatch.setenv("DISPLAY", ":0")
        launch._open_browser_when_up(url)
        deadline = time.monotonic() + 10
        while not opened and time.monotonic() < deadline:
            time.sleep(0.05)
        server.shutdown()
    assert opened == [url]


def test_the_command_line_stays_light():
    """``privsyn --help`` and a refused studio answer without loading Streamlit or pandas."""
    code = (
        "import sys; from privsyn_core.cli import main; "
        "status = main(['studio', '--address', '0.0.0.0']); "
        "print(status, 'streamlit' in sys.modules, 'pandas' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["2", "False", "False"]


def test_the_wheel_lists_every_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for top in ("privsyn_core", "dashboard")
        for p in (ROOT / top).rglob("__init__.py")
    }
    installed = {name.replace("privsyn_dashboard", "dashboard", 1) for name in config["packages"]}
    assert installed == folders
    assert config["package-dir"] == {"privsyn_dashboard": "dashboard"}
    data = config["package-data"]["privsyn_core"]
    assert "samples/adult.csv" in data and "samples/README.md" in data


def test_the_dashboard_imports_itself_relatively():
    """Installed, the folder is privsyn_dashboard: an absolute ``dashboard`` import would fail
    there (or load another project's package)."""
    absolute = []
    for path in (ROOT / "dashboard").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            absolute += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "dashboard"]
    assert not absolute


# --- the wheel, installed into a fresh environment --------------------------------------------

AUDIT_HOOK = '''
"""Installed by a .pth line: records the sockets this process binds, connects or resolves."""
import json, os, sys

_LOG = os.environ.get("PRIVSYN_AUDIT_LOG")
_EVENTS = {"socket.connect", "socket.bind", "socket.getaddrinfo", "socket.sendto",
           "socket.sendmsg", "socket.gethostbyname", "socket.gethostbyaddr",
           "socket.getnameinfo", "subprocess.Popen", "os.system"}

if _LOG:
    _fd = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def _hook(event, args):
        if event in _EVENTS:
            # connect, bind, sendto, sendmsg: (socket, address); lookups: (host, ...)
            where = args[1] if event in ("socket.connect", "socket.bind", "socket.sendto",
                                         "socket.sendmsg") else args[0]
            os.write(_fd, (json.dumps([event, repr(where)]) + "\\n").encode())

    sys.addaudithook(_hook)
'''


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def _loopback_host(text: str) -> bool:
    """An audited address or host (its repr) on this machine: 127.x, ::1 or localhost."""
    return text.lstrip("(").startswith(("'127.", "'localhost'", "'::1'"))


def _listening(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket the process ``pid`` listens on, from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table, size in (("tcp", 4), ("tcp6", 16)):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            hex_address, hex_port = local.split(":")
            raw = bytes.fromhex(hex_address)
            # /proc prints each 32-bit word in host (little-endian) order
            words = b"".join(raw[i : i + 4][::-1] for i in range(0, size, 4))
            family = socket.AF_INET if size == 4 else socket.AF_INET6
            found.append((socket.inet_ntop(family, words), int(hex_port, 16)))
    return found


def test_the_checks_see_what_they_must_refuse():
    """The listening check and the audit filter can fail: a wildcard listener (bound in this
    process, never connected to) and non-loopback addresses are reported."""
    with socket.socket() as wildcard:
        wildcard.bind(("0.0.0.0", 0))
        wildcard.listen()
        port = wildcard.getsockname()[1]
        assert ("0.0.0.0", port) in _listening(os.getpid())
    assert not _loopback_host(repr(("8.8.8.8", 1)))
    assert not _loopback_host(repr("checkip.amazonaws.com"))
    assert not _loopback_host(repr(None))  # getaddrinfo(None, ...): every interface
    assert _loopback_host(repr(("127.0.0.1", 8501))) and _loopback_host(repr("localhost"))
    assert _loopback_host(repr(("::1", 8501, 0, 0)))


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Iterator[dict]:
    """The project's wheel in a fresh venv; the heavy dependencies through a .pth path."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"  # a copy: the build writes build/ and *.egg-info next to it
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("privsyn_core", "dashboard"):
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    times = {}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q", "-w", str(work)],
        check=True, capture_output=True,
    )  # fmt: skip
    times["build"] = time.perf_counter() - started
    wheel = next(work.glob("privsyn_studio-*.whl"))
    venv = work / "fresh"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    times["install"] = time.perf_counter() - started
    site = _site_packages(venv)
    # a plain path in a .pth is added to sys.path, but the .pth files inside it are not run:
    # this environment's editable install (its finder of the checkout) stays out
    (site / "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (site / "privsyn_test_audit.py").write_text(AUDIT_HOOK)
    (site / "privsyn_test_audit.pth").write_text("import privsyn_test_audit\n")
    empty = work / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "STREAMLIT_"))}
    env |= {"HOME": str(work / "home"), "PRIVSYN_REGISTRY": str(work / "registry.sqlite3")}
    yield {"venv": venv, "site": site, "wheel": wheel, "cwd": empty, "env": env, "times": times}


@pytest.mark.slow
def test_the_wheel_installs_its_own_modules(installed):
    code = (
        "import importlib.util, json, privsyn_core, privsyn_dashboard, privsyn_dashboard.state; "
        "print(json.dumps([privsyn_core.__file__, privsyn_dashboard.__file__, "
        "str(privsyn_dashboard.state.SAMPLE), importlib.util.find_spec('dashboard') is None]))"
    )
    out = subprocess.run(
        [installed["venv"] / "bin" / "python", "-c", code],
        cwd=installed["cwd"], env=installed["env"], capture_output=True, text=True, check=True,
    )  # fmt: skip
    core, dashboard, sample, no_dashboard = json.loads(out.stdout)
    site = installed["site"].resolve()
    assert Path(core).resolve().is_relative_to(site), core
    assert Path(dashboard).resolve().is_relative_to(site), dashboard
    assert Path(sample).resolve().is_relative_to(site) and Path(sample).is_file(), sample
    assert no_dashboard, "a wheel installs no top-level 'dashboard'"


@pytest.fixture(scope="module")
def studio(installed) -> Iterator[dict]:
    port = _free_port()
    audit = installed["cwd"].parent / "audit.jsonl"
    log = installed["cwd"].parent / "studio.log"
    env = {**installed["env"], "PRIVSYN_AUDIT_LOG": str(audit)}
    started = time.perf_counter()
    with log.open("w") as out:
        process = subprocess.Popen(
            [installed["venv"] / "bin" / "privsyn", "studio", "--port", str(port)],
            cwd=installed["cwd"], env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            assert process.poll() is None, log.read_text()
            time.sleep(0.2)
    else:
        process.terminate()
        raise RuntimeError(f"privsyn studio did not start: {log.read_text()[-2000:]}")
    yield {
        "url": url, "port": port, "process": process, "log": log, "audit": audit,
        "up": time.perf_counter() - started, "times": installed["times"],
    }  # fmt: skip
    process.terminate()
    process.wait(timeout=30)


@pytest.mark.slow
def test_studio_listens_on_loopback_only(studio):
    listening = _listening(studio["process"].pid)
    assert (("127.0.0.1", studio["port"])) in listening, listening
    assert all(address.startswith("127.") or address == "::1" for address, _ in listening), (
        listening
    )
    text = studio["log"].read_text()
    assert f"URL: http://127.0.0.1:{studio['port']}" in text, text
    assert "Network URL" not in text and "External URL" not in text, text


@pytest.mark.slow
def test_studio_runs_the_sample_and_nothing_leaves_the_machine(studio):
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "Debian's chromium is needed: apt-get install -y chromium"
    requests: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync"],
        )  # fmt: skip
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.on("request", lambda request: requests.append(request.url))
        opened = time.perf_counter()
        page.goto(studio["url"])
        page.locator("[data-testid='stDataFrame']").first.wait_for(timeout=60_000)
        first_page = time.perf_counter() - opened
        assert page.get_by_text("UCI Adult sample (bundled adult.csv)").count(), "the sample"
        page.get_by_role("link", name="Run").first.click()
        page.wait_for_timeout(300)
        page.wait_for_selector(
            "[data-testid='stApp'][data-test-script-state='notRunning']", timeout=60_000
        )
        page.get_by_role("button", name="Run synthesis").click()
        page.get_by_text("Synthesised").first.wait_for(timeout=180_000)
        browser.close()
    foreign = [u for u in requests if not u.startswith((studio["url"], "data:", "blob:", "about:"))]
    assert not foreign, foreign[:5]

    events = [json.loads(line) for line in studio["audit"].read_text().splitlines()]
    binds = [args for event, args in events if event == "socket.bind"]
    assert any(f"('127.0.0.1', {studio['port']})" in args for args in binds), (
        "the audit hook saw the server's own socket",
        events[:20],
    )
    outgoing = [
        (event, args)
        for event, args in events
        if event != "socket.bind" and not _loopback_host(args)
    ]
    assert not outgoing, outgoing[:10]
    print(
        f"\nstudio timings: build {studio['times']['build']:.1f} s, venv + install "
        f"{studio['times']['install']:.1f} s, server up {studio['up']:.1f} s, first page "
        f"{first_page:.1f} s; {len(events)} audited socket events; wheel "
        f"{Path(next(Path(studio['log']).parent.glob('*.whl'))).stat().st_size} bytes"
    )
    print(events)
    print(studio["log"].read_text())
