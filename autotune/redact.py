"""Credentials kept out of everything autotune writes or prints: study attributes, exports,
log lines and error messages show a database URL's password as ``***``, whether it stands
before the host (``user:password@``) or in the query string (``?password=``, as libpq and
SQLAlchemy's drivers also take it).

Example:
    >>> redact_url("postgresql://tuner:s3cret@db.internal:5432/sweeps")
    'postgresql://tuner:***@db.internal:5432/sweeps'
    >>> redact("autotune tune --storage mysql+pymysql://u:p%40ss@h/db --trials 5")
    'autotune tune --storage mysql+pymysql://u:***@h/db --trials 5'
    >>> redact_url("sqlite:///autotune.db")
    'sqlite:///autotune.db'
    >>> redact("postgresql://h/db?user=u&password=s3cret&sslmode=require")
    'postgresql://h/db?user=u&password=***&sslmode=require'
"""

from __future__ import annotations

import re

# scheme://user:password@ in running text: the password runs up to the last '@' before a blank
# (a password may hold '/', '?' or ':', which SQLAlchemy and libpq take as they are)
_CREDENTIALS = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*:)(?P<secret>\S*)@")
# the same inside quotes (as messages and shlex quote a URL): up to the last '@' before the quote,
# blanks included
_QUOTED_CREDENTIALS = re.compile(
    r"(?P<head>(?P<quote>['\"])[A-Za-z][A-Za-z0-9+.\-]*://[^:/@'\"]*:)(?P<secret>[^'\"]*)@"
)
# one whole URL: up to its last '@', blanks included
_URL_CREDENTIALS = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*:)(?P<secret>.*)@")
# ?password=... or &password=... (also sslpassword, passwd, pwd, secret; any case) up to the
# next & (or, in running text, a blank or a quote)
_QUERY_KEY = r"[?&](?:[a-z_]*password|passwd|pwd|[a-z_]*secret)="
_QUERY_SECRET = re.compile(rf"(?P<head>{_QUERY_KEY})[^&\s'\"]*", re.IGNORECASE)
_URL_QUERY_SECRET = re.compile(rf"(?P<head>{_QUERY_KEY})[^&]*", re.IGNORECASE)

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
    return _URL_QUERY_SECRET.sub(lambda m: f"{m.group('head')}***", url)


def redact(text: str) -> str:
    """Every ``scheme://user:password@`` and ``?password=`` in ``text`` with the password
    replaced by ``***`` (a password with blanks only where its URL is quoted).

    Example:
        >>> redact("error: storage URL 'postgresql://u:a b@h/db': cannot connect")
        "error: storage URL 'postgresql://u:***@h/db': cannot connect"
    """
    text = _QUOTED_CREDENTIALS.sub(lambda m: f"{m.group('head')}***@", text)
    text = _CREDENTIALS.sub(lambda m: f"{m.group('head')}***@", text)
    return _QUERY_SECRET.sub(lambda m: f"{m.group('head')}***", text)


def redact_values(values: dict) -> dict:
    """``values`` (a problem) with each text value :func:`redact` ed: a server's command
    template may hold a database URL with its password.

    Example:
        >>> redact_values({"command": "srv --db postgresql://bob:hunter2@db/prod", "rate": 4})
        {'command': 'srv --db postgresql://bob:***@db/prod', 'rate': 4}
    """
    return {k: redact(v) if isinstance(v, str) else v for k, v in values.items()}


def redacted_keys(values: dict) -> list[str]:
    """The keys of a stored problem whose text had a password left out (``***``): a resume
    must be given them again.

    Example:
        >>> redacted_keys({"command": "srv postgresql://bob:***@db/prod", "rate": 4})
        ['command']
    """
    return [k for k, v in values.items() if isinstance(v, str) and redact(v) == v
            and (":***@" in v or _LEFT_OUT_QUERY.search(v))]  # fmt: skip


_LEFT_OUT_QUERY = re.compile(rf"{_QUERY_KEY}\*\*\*", re.IGNORECASE)
