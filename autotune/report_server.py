"""``autotune report --serve PORT``: the report, rebuilt from the storage at most every few
seconds, served on localhost while a sweep writes to the same storage; the page reloads itself
every 10 s.

Example (not run: it serves until stopped):
    >>> from autotune.report_server import serve_report  # doctest: +SKIP
    >>> serve_report(lambda: "<html></html>", 8050)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import html
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_RELOAD = '<meta http-equiv="refresh" content="10">'


class _Cache:
    """The last page built, rebuilt when older than ``max_age_s``."""

    def __init__(self, build: Callable[[], str], max_age_s: float) -> None:
        self.build, self.max_age_s = build, max_age_s
        self.page, self.built = "", 0.0
        self.lock = threading.Lock()

    def get(self) -> str:
        with self.lock:
            if time.monotonic() - self.built > self.max_age_s:
                try:
                    self.page = self.build().replace("<head>", "<head>" + _RELOAD, 1)
                except Exception as exc:  # noqa: BLE001 - e.g. no trial stored yet
                    why = html.escape(str(exc))  # a study's name is data, not markup
                    self.page = f"<html><head>{_RELOAD}</head><body>not ready: {why}</body></html>"
                self.built = time.monotonic()
            return self.page


def make_server(build: Callable[[], str], port: int, max_age_s: float = 5.0) -> ThreadingHTTPServer:
    """An HTTP server on 127.0.0.1:``port`` answering every GET with the current report."""
    cache = _Cache(build, max_age_s)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = cache.get().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(ConnectionError):  # a browser that left mid-page
                self.wfile.write(body)

    return _QuietServer(("127.0.0.1", port), Handler)


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up early is its own business: no traceback on the console."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ServerStopped(KeyboardInterrupt):
    """Ctrl-C or SIGTERM ended the report's server; its text is what the CLI says then."""


def serve_report(
    build: Callable[[], str], port: int, on_ready: Callable[[], None] = lambda: None
) -> None:
    """Serve until interrupted; ``on_ready`` runs once the port is bound.

    Raises:
        OSError: the port cannot be bound (another server holds it), with the port as its
            ``filename``, which the CLI's one-line error names.
        ServerStopped: Ctrl-C or SIGTERM stopped the server.
    """
    try:
        server = make_server(build, port)
    except OSError as exc:
        exc.filename = exc.filename or f"--serve {port}"
        raise
    try:
        on_ready()  # a signal right after it has said so stops the server too
        server.serve_forever()
    except KeyboardInterrupt:
        raise ServerStopped("report server stopped") from None
    finally:
        server.server_close()
