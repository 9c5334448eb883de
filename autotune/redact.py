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

# scheme://user:password@ -- the password runs up to the last '@' before the host part
_CREDENTIALS = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*:)(?P<secret>[^\s/]*)@")
# ?password=... or &password=... (also passwd, pwd; any case) up to the next & or blank
_QUERY_SECRET = re.compile(r"(?P<head>[?&](?:password|passwd|pwd)=)[^&\s'\"]*", re.IGNORECASE)

#: The environment variable a storage URL may come from instead of the command line.
STORAGE_ENV = "AUTOTUNE_STORAGE"


def redact_url(url: str) -> str:
    """``url`` with its password, if any, replaced by ``***``."""
    return redact(url)


def redact(text: str) -> str:
    """Every ``scheme://user:password@`` and ``?password=`` in ``text`` with the password
    replaced by ``***``."""
    text = _CREDENTIALS.sub(lambda m: f"{m.group('head')}***@", text)
    return _QUERY_SECRET.sub(lambda m: f"{m.group('head')}***", text)
