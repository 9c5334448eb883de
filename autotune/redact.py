"""Credentials kept out of everything autotune writes or prints: study attributes, exports,
log lines and error messages show a database URL's password as ``***``, whether it stands
before the host (``user:password@``) or in the query string (``?password=``, as libpq and
SQLAlchemy's drivers also take it); a server command's option that takes a secret
(``--api-key X``, ``--password=X``, ``--hf-token X``, ``--aws-secret-access-key X``), a URL's
credential in its query (``?access_token=X``, ``?X-Amz-Signature=X``, ``?sig=X``) or an
environment assignment (``env HF_TOKEN=X``, ``PGPASSWORD=X``) shows it so too.

Example:
    >>> redact_url("postgresql://tuner:s3cret@db.internal:5432/sweeps")
    'postgresql://tuner:***@db.internal:5432/sweeps'
    >>> redact("autotune tune --storage mysql+pymysql://u:p%40ss@h/db --trials 5")
    'autotune tune --storage mysql+pymysql://u:***@h/db --trials 5'
    >>> redact_url("sqlite:///autotune.db")
    'sqlite:///autotune.db'
    >>> redact("postgresql://h/db?user=u&password=s3cret&sslmode=require")
    'postgresql://h/db?user=u&password=***&sslmode=require'
    >>> redact("vllm serve m --api-key sk-123 --max-num-batched-tokens 2048")
    'vllm serve m --api-key *** --max-num-batched-tokens 2048'
    >>> redact("env HF_TOKEN=hf_abc max_tokens=16 vllm serve m")
    'env HF_TOKEN=*** max_tokens=16 vllm serve m'
    >>> redact("autotune tune server --problem 'command=HF_TOKEN=hf_abc srv'")
    "autotune tune server --problem 'command=HF_TOKEN=*** srv'"
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from urllib.parse import unquote

# scheme://user:password@ in running text: the password runs up to the last '@' before a blank
# (a password may hold '/', '?' or ':', which SQLAlchemy and libpq take as they are). The
# scheme's separator as mistyped too (scheme:/, scheme:, scheme//, scheme:\\): a typo is when
# the URL lands in an error message
_SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*(?::[/\\]*|[/\\]{2,})"
_CREDENTIALS = re.compile(rf"(?P<head>{_SCHEME}[^:/\\@\s]*:)(?P<secret>\S*)@")
# the same inside quotes (as messages and shlex quote a URL): up to the last '@' before the quote,
# blanks included
_QUOTED_CREDENTIALS = re.compile(
    rf"(?P<head>(?P<quote>['\"]){_SCHEME}[^:/\\@'\"]*:)(?P<secret>[^'\"]*)@"
)
# one whole URL: up to its last '@', blanks included
_URL_CREDENTIALS = re.compile(rf"(?P<head>{_SCHEME}[^:/\\@\s]*:)(?P<secret>.*)@")
# ?password=... or &password=... (also sslpassword, passwd, pwd, secret; any case; a key
# written with %-escapes, ?pass%77ord=, as the driver decodes it) up to the next & (or, in
# running text, a blank or a quote); and the keys that carry a credential in a URL a server is
# given: OAuth's ?access_token= (and token, id_, refresh_, auth_, session_), ?api_key= (apikey,
# key, x-api-key, access_key, secret_key), a signed URL's ?sig= and ?signature= (Azure's SAS),
# ?X-Amz-Signature=, ?X-Amz-Credential=, ?X-Amz-Security-Token= (S3's); not ?csrf_token= or
# ?sslkey= (a file's path)
_SECRET_KEY = re.compile(
    r"[a-z_]*password|passwd|pwd|[a-z_]*secret"
    r"|(?:access|id|refresh|auth|session|x-amz-security)?[_-]?token"
    r"|(?:x-)?api[_-]?key|key|(?:access|secret|private)[_-]?key"
    r"|sig|signature|x-amz-signature|x-amz-credential",
    re.IGNORECASE,
)
_QUERY_KEY = r"[?&](?P<key>(?:[A-Za-z0-9_.\-]|%[0-9A-Fa-f]{2})+)="
_QUERY_SECRET = re.compile(rf"(?P<head>{_QUERY_KEY})(?P<secret>[^&\s'\"]*)")
_URL_QUERY_SECRET = re.compile(rf"(?P<head>{_QUERY_KEY})(?P<secret>[^&]*)")


def _query_secrets(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """The ``key=value`` pairs ``pattern`` finds in ``text`` whose key names a secret."""
    return (m for m in pattern.finditer(text) if _SECRET_KEY.fullmatch(unquote(m.group("key"))))


def _blank_query_secrets(pattern: re.Pattern[str], text: str) -> str:
    def blank(m: re.Match[str]) -> str:
        secret = _SECRET_KEY.fullmatch(unquote(m.group("key")))
        return f"{m.group('head')}***" if secret else m.group(0)

    return pattern.sub(blank, text)


# a command-line option that takes a secret (--password X, --api-key=X, --hf-token X,
# --aws-secret-access-key X, --key X, --client-credentials X: as servers and their storage
# clients take them): one whose last word says so, its value up to a blank, or quoted; not
# --max-num-batched-tokens 2048, --long-prefill-token-threshold 0 or --secret-file PATH
_FLAG_SECRET = re.compile(
    r"(?P<head>(?<![\w-])--(?:[A-Za-z0-9]+[-_])*"
    r"(?:password|passwd|secret|token|key|apikey|credentials?|signature)"
    r"(?:=|\s+)(?P<quote>['\"])?)(?P<secret>(?(quote)[^'\"]*|(?!--)[^\s'\"]+))",
    re.IGNORECASE,
)
# an environment assignment that holds a secret (env HF_TOKEN=X srv, PGPASSWORD='X',
# OPENAI_API_KEY=X: as a command template sets them), a word of its own or a --problem
# value's (command=HF_TOKEN=X, a,token=X); not max_tokens=16, nor a rate per token (a metric,
# --slo energy_j_per_token=1.5)
_ENV_SECRET = re.compile(
    r"(?P<head>(?<![^\s'\"=,])[A-Za-z0-9_]*(?:password|passwd|secret|token|api_?key|access_key)"
    r"(?<!_per_token)=(?P<quote>['\"])?)(?P<secret>(?(quote)[^'\"]*|[^\s'\"]+))",
    re.IGNORECASE,
)
# an HTTP credential on a command line or in a header a server echoes ("Authorization: Bearer
# X", "Bearer X", "Authorization: Basic X")
_AUTH_SECRET = re.compile(
    r"(?P<head>(?:\bauthorization\s*[:=]\s*(?:(?:bearer|basic|token)\s+)?|\bbearer\s+)"
    r")(?P<secret>[^\s'\"]+)",
    re.IGNORECASE,
)
# a password :func:`secrets_in` finds shorter than this is not blanked wherever else it stands
# (a one-letter password would blank that letter in every word); its URL form still is
_SHORTEST_KNOWN = 4

#: The environment variable a storage URL may come from instead of the command line.
STORAGE_ENV = "AUTOTUNE_STORAGE"


def redact_url(url: str) -> str:
    """``url`` (one whole URL, or one command-line argument holding it) with its password, if
    any, replaced by ``***``; a password may hold blanks here.

    Example:
        >>> redact_url("postgresql://u:p w/x@h/db?sslpassword=k y")
        'postgresql://u:***@h/db?sslpassword=***'
    """
    url = _URL_CREDENTIALS.sub(lambda m: f"{m.group('head')}***@", url)
    return _blank_query_secrets(_URL_QUERY_SECRET, url)


def redact(text: str, known: Iterable[str] = ()) -> str:
    """Every ``scheme://user:password@`` and ``?password=`` in ``text`` with the password
    replaced by ``***`` (a password with blanks only where its URL is quoted); and each of
    the ``known`` passwords (:func:`secrets_in` a command template or a storage URL) wherever
    it stands, also outside a URL: a failed trial's reason may echo one in any form.

    Example:
        >>> redact("error: storage URL 'postgresql://u:a b@h/db': cannot connect")
        "error: storage URL 'postgresql://u:***@h/db': cannot connect"
        >>> redact("srv: login as bob with hunter2 refused", known={"hunter2"})
        'srv: login as bob with *** refused'
    """
    text = _QUOTED_CREDENTIALS.sub(lambda m: f"{m.group('head')}***@", text)
    text = _CREDENTIALS.sub(lambda m: f"{m.group('head')}***@", text)
    text = _blank_query_secrets(_QUERY_SECRET, text)
    text = _FLAG_SECRET.sub(lambda m: f"{m.group('head')}***", text)
    text = _ENV_SECRET.sub(lambda m: f"{m.group('head')}***", text)
    text = _AUTH_SECRET.sub(lambda m: f"{m.group('head')}***", text)
    for secret in sorted(known, key=len, reverse=True):  # a longer one before its parts
        if len(secret) >= _SHORTEST_KNOWN and secret.strip("*"):
            text = text.replace(secret, "***")
    return text


def query_secret_holds_at(url: str) -> bool:
    """Whether a ``?password=`` (or another secret) value of ``url`` holds a raw ``@``, which
    a database driver reads as the end of a ``user:password@`` and what follows as the host.

    Example:
        >>> query_secret_holds_at("postgresql://h/db?user=u&password=hunt@er2")
        True
        >>> query_secret_holds_at("postgresql://u:pa/ss@h/db?password=hunt%40er2")
        False
    """
    return any("@" in m.group("secret") for m in _query_secrets(_URL_QUERY_SECRET, url))


def secrets_in(text: str, whole_url: bool = False) -> frozenset[str]:
    """The passwords :func:`redact` (``whole_url``: :func:`redact_url`) leaves out of
    ``text``, each also as its URL's ``%``-escapes decode it: to be blanked wherever else they
    appear (:func:`redact`'s ``known``), e.g. in what a server started with them prints.

    Example:
        >>> sorted(secrets_in("srv --db postgresql://bob:hunt%40er2@db/prod?sslpassword=k3y5"))
        ['hunt%40er2', 'hunt@er2', 'k3y5']
        >>> sorted(secrets_in("postgresql://u:a b@h/db", whole_url=True))
        ['a b']
    """
    if whole_url:
        found = [m.group("secret") for m in _URL_CREDENTIALS.finditer(text)]
        found += [m.group("secret") for m in _query_secrets(_URL_QUERY_SECRET, text)]
    else:
        found = [m.group("secret") for m in _QUOTED_CREDENTIALS.finditer(text)]
        found += [m.group("secret") for m in _CREDENTIALS.finditer(text)]
        found += [m.group("secret") for m in _query_secrets(_QUERY_SECRET, text)]
        found += [m.group("secret") for m in _FLAG_SECRET.finditer(text)]
        found += [m.group("secret") for m in _ENV_SECRET.finditer(text)]
        found += [m.group("secret") for m in _AUTH_SECRET.finditer(text)]
    return frozenset(s for secret in found for s in (secret, unquote(secret)) if s)


def secrets_of_values(values: dict) -> frozenset[str]:
    """The passwords :func:`redact_values` leaves out of ``values`` (a problem): to be blanked
    in a trial's reason too, where a server echoes its command's password in any form.

    Example:
        >>> secrets_of_values({"command": "srv --db postgresql://bob:hunter2@db/prod", "n": 4})
        frozenset({'hunter2'})
    """
    return frozenset().union(*(secrets_in(v) for v in values.values() if isinstance(v, str)))


def redact_values(values: dict, known: Iterable[str] = ()) -> dict:
    """``values`` (a problem) with each text value :func:`redact` ed (``known``: passwords
    to blank also outside a URL): a server's command template may hold a database URL with
    its password, or an API key.

    Example:
        >>> redact_values({"command": "srv --db postgresql://bob:hunter2@db/prod", "rate": 4})
        {'command': 'srv --db postgresql://bob:***@db/prod', 'rate': 4}
        >>> redact_values({"command": "srv --api-key sk-1"}, known={"sk-1"})
        {'command': 'srv --api-key ***'}
    """
    return {k: redact(v, known) if isinstance(v, str) else v for k, v in values.items()}


def redacted_keys(values: dict) -> list[str]:
    """The keys of a stored problem whose text had a password left out (``***``): a resume
    must be given them again.

    Example:
        >>> redacted_keys({"command": "srv postgresql://bob:***@db/prod", "rate": 4})
        ['command']
    """
    return [k for k, v in values.items() if isinstance(v, str) and redact(v) == v
            and (":***@" in v or _LEFT_OUT_QUERY.search(v) or _left_out_flag(v))]  # fmt: skip


_LEFT_OUT_QUERY = re.compile(rf"{_QUERY_KEY}\*\*\*", re.IGNORECASE)


def _left_out_flag(text: str) -> bool:
    """Whether an option that takes a secret shows it as ``***`` (left out when stored)."""
    found = [*_FLAG_SECRET.finditer(text), *_ENV_SECRET.finditer(text)]
    return any(m.group("secret") == "***" for m in found)
