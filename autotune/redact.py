"""Credentials kept out of everything autotune writes or prints: study attributes, exports,
log lines and error messages show a database URL's password as ``***``.

Example:
    >>> redact_url("postgresql://tuner:s3cret@db.internal:5432/sweeps")
    'postgresql://tuner:***@db.internal:5432/sweeps'
    >>> redact("autotune tune --storage mysql+pymysql://u:p%40ss@h/db --trials 5")
    'autotune tune --storage mysql+pymysql://u:***@h/db --trials 5'
    >>> redact_url("sqlite:///autotune.db")
    'sqlite:///autotune.db'
"""

from __future__ import annotations

import re

# scheme://user:password@ -- the password runs up to the last '@' before the host part
_CREDENTIALS = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*:)(?P<secret>[^\s/]*)@")

#: The environment variable a storage URL may come from instead of the command line.
STORAGE_ENV = "AUTOTUNE_STORAGE"


def redact_url(url: str) -> str:
    """``url`` with its password, if any, replaced by ``***``."""
    return redact(url)


def redact(text: str) -> str:
    """Every ``scheme://user:password@`` in ``text`` with the password replaced by ``***``."""
    return _CREDENTIALS.sub(lambda m: f"{m.group('head')}***@", text)
