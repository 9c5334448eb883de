"""One streaming ``POST /v1/completions`` request to an OpenAI-compatible server, timed: its
first token (TTFT), the gaps after, and its tokens counted (:class:`StreamTokens`: the server's
``usage``, else token ids, else the ``max_tokens`` the request forces where it finished for
``length``), or why it failed (an error status or event, a stream cut short before ``[DONE]``,
fewer tokens than it forces: :func:`incomplete`).

Example:
    >>> api_key(["vllm", "serve", "m", "--api-key", "sk-1"])
    'sk-1'
"""

from __future__ import annotations

import http.client
import json
import time
from typing import Any


def api_key(argv: list[str]) -> str | None:
    """The key a server started with ``argv`` wants its requests to carry (vLLM's and
    SGLang's ``--api-key``, as ``--api-key KEY`` or ``--api-key=KEY``), or None.

    Example:
        >>> api_key(["vllm", "serve", "m", "--api-key", "sk-1"]), api_key(["srv", "--api-key=k"])
        ('sk-1', 'k')
        >>> api_key(["srv", "--port", "8000"]) is None
        True
    """
    for index, arg in enumerate(argv):
        if arg == "--api-key" and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith("--api-key="):
            return arg.split("=", 1)[1]
    return None


def stream_request(
    port: int,
    body: dict[str, Any],
    out: dict[str, Any],
    key: str | None = None,
    due: float | None = None,
) -> None:
    """One streaming completion: its send time, when its first and last tokens came and how
    many it got (:class:`StreamTokens`), or the error (an HTTP status with its reason and the
    body's error message, an error event, no token at all). ``key``: sent as
    ``Authorization: Bearer KEY``, as OpenAI's clients send it. ``due``: when the trace has
    the request arrive (``time.perf_counter``), recorded as its ``sent`` however late this
    thread starts sending it; None: now."""
    sent = time.perf_counter() if due is None else due
    tokens = StreamTokens()
    done = False
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        conn.request("POST", "/v1/completions", json.dumps(body), headers)
        response = conn.getresponse()
        if response.status != 200:
            out["error"] = _http_error(response)
            return
        while True:
            line = response.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            event = json.loads(data)
            if isinstance(event, dict) and "error" in event:
                out["error"] = f"an error event: {_message(event)}"
                break
            tokens.add(event, time.perf_counter())
        if "error" not in out:
            fault = incomplete(tokens, body, done)
            if fault:
                out["error"] = fault
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError,
            http.client.HTTPException) as exc:  # fmt: skip
        out["error"] = f"{type(exc).__name__}: {exc}"
    out.update(sent=sent, first=tokens.first, last=tokens.last,
               tokens=tokens.count(body))  # fmt: skip


def incomplete(tokens: StreamTokens, body: dict[str, Any], done: bool) -> str | None:
    """Why a stream that ended without an error is no complete answer to ``body``, or None:
    it closed before ``data: [DONE]`` (a server that crashed, or cut it short), carried no
    token, or fewer than the ``max_tokens`` the request forces (``ignore_eos``,
    ``min_tokens``), by the server's count or, where it gave none, by its events of text
    where it did not finish for ``length``.

    Example:
        >>> s = StreamTokens()
        >>> s.add({"choices": [{"text": " a", "token_ids": [7]}]}, 1.0)
        >>> incomplete(s, {"max_tokens": 4, "ignore_eos": True}, done=False)
        'the stream ended without [DONE] after 1 token (the server closed it)'
        >>> incomplete(s, {"max_tokens": 4, "ignore_eos": True}, done=True)
        '1 token of the 4 the request forces (ignore_eos, min_tokens): the server stopped early'
        >>> incomplete(s, {"max_tokens": 4}, done=True) is None
        True
    """
    count = tokens.count(body)
    if not done:
        return (f"the stream ended without [DONE] after {count} token{'s' * (count != 1)} (the "
                "server closed it)")  # fmt: skip
    if tokens.first is None:
        return "HTTP 200 but no token streamed"
    wanted = body.get("max_tokens")
    if not forced_tokens(body) or not isinstance(wanted, int) or count >= wanted:
        return None
    if tokens.known():
        return (f"{count} token{'s' * (count != 1)} of the {wanted} the request forces "
                "(ignore_eos, min_tokens): the server stopped early")  # fmt: skip
    return (f"{count} events of text, finished for {tokens.finish or 'no reason'}: not the "
            f"{wanted} tokens the request forces (ignore_eos, min_tokens), and no count of them "
            "(usage, token_ids) to tell")  # fmt: skip


class StreamTokens:
    """How many tokens a completion's stream carried, and when the first and the last came.

    An event is not a token: a server packs several into one (SGLang's ``--stream-interval``,
    vLLM under load) and ends with an empty chunk that carries only ``finish_reason``. The
    count is the server's own ``usage.completion_tokens`` (the last event's, which
    ``stream_options: {"include_usage": true}`` asks for) where it sends one; else the
    ``token_ids`` (or ``logprobs``) of the events, where each says; else the ``max_tokens``
    the request forced (``ignore_eos``, or ``min_tokens`` as many) where the stream finished
    for ``length``; else one token an event of text, as few as it could have been. The
    first and last are the first and last events that carried content.

    Example:
        >>> s = StreamTokens()
        >>> s.add({"choices": [{"text": " a b c d", "finish_reason": None}]}, 1.0)
        >>> s.add({"choices": [{"text": " e f", "finish_reason": None}]}, 2.0)
        >>> s.add({"choices": [{"text": "", "finish_reason": "length"}]}, 2.5)
        >>> s.first, s.last, s.count({"max_tokens": 6, "ignore_eos": True})
        (1.0, 2.0, 6)
        >>> s.count({"max_tokens": 6}), s.known()
        (2, False)
        >>> s.add({"choices": [], "usage": {"completion_tokens": 6}}, 2.6)
        >>> s.count({"max_tokens": 6}), s.known()
        (6, True)
    """

    def __init__(self) -> None:
        self.first: float | None = None
        self.last: float | None = None
        self.counted = 0  # the tokens of events that said how many
        self.uncounted = 0  # events of text that did not
        self.usage: int | None = None
        self.finish: str | None = None

    def add(self, event: Any, now: float) -> None:
        """Take in one ``data:`` event that arrived at ``now``."""
        usage = event.get("usage")
        if isinstance(usage, dict) and type(usage.get("completion_tokens")) is int:
            self.usage = usage["completion_tokens"]
        for choice in event.get("choices") or []:
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])
            carried = _choice_tokens(choice)
            if carried == 0:
                continue
            if self.first is None:
                self.first = now
            self.last = now
            if carried is None:
                self.uncounted += 1
            else:
                self.counted += carried

    def known(self) -> bool:
        """Whether the stream said how many tokens it carried (usage, or every event's ids)."""
        return self.usage is not None or not self.uncounted

    def count(self, body: dict[str, Any]) -> int:
        """The tokens streamed for the request ``body`` (see the class docstring)."""
        if self.usage is not None:
            return self.usage
        if not self.uncounted:
            return self.counted
        if forced_tokens(body) and self.finish == "length":
            return int(body["max_tokens"])
        return self.counted + self.uncounted


def _choice_tokens(choice: dict[str, Any]) -> int | None:
    """The tokens one choice of an event carries: its ``token_ids``' or its ``logprobs``'
    (a completion's ``tokens``, a chat's ``content``) where it has them, 0 for no text, None
    for text that does not say how many."""
    ids = choice.get("token_ids")
    if isinstance(ids, list):
        return len(ids)
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, dict):
        listed = logprobs.get("tokens", logprobs.get("content"))
        if isinstance(listed, list):
            return len(listed)
    text = choice.get("text")
    if text is None and isinstance(choice.get("delta"), dict):
        text = choice["delta"].get("content")
    return None if text else 0


def forced_tokens(body: dict[str, Any]) -> bool:
    """Whether the request ``body`` makes the server generate all its ``max_tokens``
    (``ignore_eos``, or ``min_tokens`` as many: vLLM's and SGLang's sampling options).

    Example:
        >>> forced_tokens({"max_tokens": 8, "ignore_eos": True}), forced_tokens({"max_tokens": 8})
        (True, False)
    """
    wanted = body.get("max_tokens")
    return bool(body.get("ignore_eos")) or (
        isinstance(wanted, int) and (body.get("min_tokens") or 0) >= wanted
    )


def _http_error(response: http.client.HTTPResponse) -> str:
    """``HTTP 501 Unsupported method ('POST')``: a refused request's status and reason, and the
    message of a JSON error body (OpenAI's ``{"error": {"message": ...}}``, vLLM's and the
    project engine's forms), cut short."""
    text = f"HTTP {response.status} {response.reason}".strip()
    try:
        body = json.loads(response.read(65536))
    except (OSError, ValueError, http.client.HTTPException):
        return text
    message = _message(body) if isinstance(body, dict) else ""
    return f"{text}: {message}" if message else text


def _message(body: dict[str, Any]) -> str:
    """The message of an error body: ``{"error": "..."}``, ``{"error": {"message": "..."}}``
    or ``{"message": "..."}``, on one line, cut short.

    Example:
        >>> _message({"error": {"message": "max_tokens must be at least 1", "code": 400}})
        'max_tokens must be at least 1'
    """
    error = body.get("error", body)
    message = error.get("message", "") if isinstance(error, dict) else error
    return " ".join(str(message or "").split())[:200]
