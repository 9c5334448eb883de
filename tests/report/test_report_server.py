"""The live report's server: a port another server holds is named, before anything says
the report is served."""

import socket

import pytest

from autotune.report_server import serve_report


def test_a_port_already_taken_is_named_and_nothing_claims_to_serve():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ready: list[bool] = []
        with pytest.raises(OSError) as refused:
            serve_report(lambda: "<html></html>", port, on_ready=lambda: ready.append(True))
    assert refused.value.filename == f"--serve {port}" and not ready
