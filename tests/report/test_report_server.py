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


def test_a_client_that_hangs_up_mid_page_leaves_no_traceback(capfd):
    import struct
    import threading
    import urllib.request

    from autotune.report_server import make_server

    page = "<html>" + "x" * (16 << 20) + "</html>"  # more than the socket buffers take at once
    server = make_server(lambda: page, 0)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            client.recv(1024)  # the answer has begun
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # closed with a reset: the server's write fails; it goes on serving the next one
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as answer:
            assert len(answer.read()) == len(page)
    finally:
        server.shutdown()
        server.server_close()
    assert "Traceback" not in capfd.readouterr().err


def test_a_page_not_ready_shows_its_reason_as_text_not_markup():
    import threading
    import urllib.request

    from autotune.report_server import make_server

    def build() -> str:
        raise KeyError("no study named '<img src=x onerror=alert(1)>'")

    server = make_server(build, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        with urllib.request.urlopen(url, timeout=30) as answer:
            page = answer.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    assert "not ready" in page and "<img" not in page and "&lt;img" in page
