"""How the dashboard is served: the project's Streamlit settings in one place, and the launcher
behind ``privsyn studio`` that applies them wherever the package is installed.

``.streamlit/config.toml`` holds the same settings for ``streamlit run dashboard/app.py`` from
the repository root, the only place Streamlit reads it from; ``tests/test_studio.py`` checks
that the two agree. ``privsyn studio`` passes the settings as Streamlit's command-line flags,
which outrank any ``config.toml`` in the current folder or the user's home and any
``STREAMLIT_*`` variable, so the dashboard serves the same way from any folder.

Streamlit runs in this process (its own ``streamlit run`` entry point, called with a list of
arguments), not as a child process: the one process that holds the private table is the one
started, so its exit status, its signals and an audit hook installed at interpreter start
(the test records every socket it opens this way) cover the server itself.

This module imports nothing heavy: Streamlit is imported only once the arguments have been
checked, so a bad port or address is answered at once.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

from privsyn_core.errors import UsageError

LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 8501

#: Streamlit's options, by their dotted names, as the project serves the dashboard
SERVER_SETTINGS: Mapping[str, str | int | bool] = MappingProxyType(
    {
        # no browser opened by Streamlit, no e-mail prompt, no "skills" advert
        "server.headless": True,
        # private data: this machine only unless the user opts in (privsyn studio
        # --address ... --allow-remote). A manually set address also keeps Streamlit from
        # detecting the machine's internal IP (a UDP socket "connected" to 8.8.8.8) and
        # external IP (an HTTP request to checkip.amazonaws.com) for its start-up banner.
        "server.address": LOOPBACK,
        # MB; the engine's memory use grows with rows x columns
        "server.maxUploadSize": 200,
        "server.enableXsrfProtection": True,
        "server.enableCORS": True,
        # nothing to watch in an installed package, and a watcher thread per source folder
        "server.fileWatcherType": "none",
        # no usage statistics: the browser would report them to Streamlit's collector
        "browser.gatherUsageStats": False,
        "client.toolbarMode": "viewer",
        # no tracebacks (they can quote the private table) in the browser
        "client.showErrorDetails": "none",
        "runner.fastReruns": True,
        # no full garbage collection after every script and fragment run: a full pass over
        # every session's objects, many times a second while sessions poll their runs, took
        # over half of a ten-session server's time (dashboard/worker.py collects once per
        # run instead)
        "runner.postScriptGC": False,
        "theme.base": "light",
    }
)


def is_loopback(address: str) -> bool:
    """``address`` serves this machine only: a loopback IP literal or ``localhost``. A host
    name is not resolved (that could ask a DNS server): any other name counts as remote."""
    if address.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_wildcard(address: str) -> bool:
    return address.strip("[]") in {"0.0.0.0", "::", ""}


def studio_settings(port: int, address: str, allow_remote: bool) -> dict[str, str | int | bool]:
    """The Streamlit options for one ``privsyn studio``: :data:`SERVER_SETTINGS`, the port, and
    the address once it is allowed. Refuses (:class:`UsageError`) a port outside 1-65535 and an
    address beyond loopback without ``allow_remote``."""
    if not 1 <= port <= 65535:
        raise UsageError(f"--port must be between 1 and 65535, got {port}")
    if not address.strip():
        raise UsageError("--address is empty; leave it out to serve this machine only")
    settings: dict[str, str | int | bool] = {**SERVER_SETTINGS, "server.port": port}
    if is_loopback(address):
        settings["server.address"] = address
        return settings
    if not allow_remote:
        raise UsageError(
            f"--address {address} would serve the dashboard beyond this machine, where anyone "
            "who reaches it can load tables and spend their privacy budget (Streamlit has no "
            "login); add --allow-remote to do it anyway, or leave --address out"
        )
    settings["server.address"] = address
    # the name browsers are to use: Streamlit then checks their origin against it instead of
    # detecting this machine's internal and external IP (a request to the internet)
    settings["browser.serverAddress"] = socket.gethostname() if _is_wildcard(address) else address
    return settings


def remote_warning(settings: Mapping[str, str | int | bool]) -> str:
    """What ``--allow-remote`` means, printed when it is used."""
    address, port = settings["server.address"], settings["server.port"]
    name = settings.get("browser.serverAddress", address)
    return (
        f"privsyn studio: WARNING: serving beyond this machine on {address}:{port} "
        "(--allow-remote). Anyone who can reach it can upload tables, run syntheses that "
        "spend their privacy budget and download the results: Streamlit has no login and "
        "serves plain HTTP. Prefer the default (127.0.0.1) with an SSH tunnel, or put an "
        f"authenticating TLS proxy in front. Browsers should open http://{name}:{port}; "
        "under another name Streamlit checks the origin against this machine's IP "
        "addresses, which can send a request to the internet to learn the external one."
    )


def streamlit_flags(settings: Mapping[str, str | int | bool]) -> list[str]:
    """``settings`` as ``streamlit run`` flags (``--server.port 8501``...)."""
    flags: list[str] = []
    for name, value in settings.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        flags += [f"--{name}", text]
    return flags


def check_port_free(address: str, port: int) -> None:
    """Refuse, with one readable line, a port Streamlit could not listen on (taken, or
    reserved for root), before Streamlit starts and prints its own traceback."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    host = LOOPBACK if address.lower() == "localhost" else address.strip("[]")
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # as the server will: a port left in TIME_WAIT by a previous run is free
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UsageError(
                    f"port {port} on {address} is in use (another dashboard?); stop it or "
                    "choose another with --port"
                ) from None
            if exc.errno == errno.EACCES:
                raise UsageError(
                    f"port {port} needs administrator rights; choose one above 1023 with --port"
                ) from None
            reason = exc.strerror or str(exc)
            raise UsageError(f"cannot listen on {address} port {port}: {reason}") from None


def _open_browser_when_up(url: str) -> None:
    """Open the user's browser once the server answers (a loopback request), in the
    background. Only with a graphical session: on a bare terminal, Python's webbrowser could
    start a text browser inside it."""
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        return

    # no proxy: urllib would send even a loopback request to an http_proxy from the environment
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def wait_and_open() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with direct.open(f"{url}/_stcore/health", timeout=2) as answer:
                    if answer.read() == b"ok":
                        import webbrowser

                        webbrowser.open(url)
                        return
            except OSError:
                time.sleep(0.3)

    threading.Thread(target=wait_and_open, name="privsyn-open-browser", daemon=True).start()


def browser_url(address: str, port: int) -> str:
    """Where a browser on this machine opens the dashboard served on ``address``."""
    host = LOOPBACK if _is_wildcard(address) else address.strip("[]")
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve(
    port: int = DEFAULT_PORT,
    address: str = LOOPBACK,
    *,
    allow_remote: bool = False,
    open_browser: bool = True,
) -> int:
    """Serve the dashboard with :data:`SERVER_SETTINGS` until Ctrl-C; the exit status."""
    settings = studio_settings(port, address, allow_remote)
    check_port_free(address, port)
    remote = not is_loopback(address)
    if remote:
        print(remote_warning(settings), file=sys.stderr, flush=True)
    url = browser_url(address, port)
    where = "reachable from other machines" if remote else "this machine only"
    print(
        f"privsyn studio: starting the dashboard at {url} ({where}; no usage statistics). "
        "Ctrl-C stops it.",
        flush=True,
    )
    if open_browser:
        _open_browser_when_up(url)
    return _run_streamlit(Path(__file__).with_name("app.py"), streamlit_flags(settings))


def _run_streamlit(app: Path, flags: Sequence[str]) -> int:
    """``streamlit run app flags...`` in this process, through Streamlit's own entry point."""
    from streamlit.web import cli as streamlit_cli

    try:
        streamlit_cli.main.main(
            args=["run", str(app), *flags], prog_name="privsyn studio", standalone_mode=False
        )
    except SystemExit as stop:  # Streamlit exits with a status on its own errors
        return stop.code if isinstance(stop.code, int) else 1
    return 0
