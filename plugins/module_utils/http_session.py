# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""open_url's requests with one TLS context for a module's whole run.

ansible.module_utils.urls.open_url builds a new SSL context, loading the system's certificate store, for every
request, even a plain http one: about 50 ms each. verify's probe asks its server ten times in one round trip
(the endpoints, a chat completion, the fingerprint's prompts); one context serves them all.
"""

from __future__ import annotations

import inspect
import time

from ansible.module_utils.urls import Request, make_context
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError

# How often a request that failed for a passing reason is asked again, and the wait before the first retry (each
# later one waits twice as long): as uv and huggingface_hub retry
RETRIES = 3
RETRY_DELAY = 1.0

# Request.open takes a TLS context from ansible-core 2.17 on; before, each request makes its own (as open_url does)
try:
    _OPEN_TAKES_CONTEXT = "context" in inspect.signature(Request.open).parameters
except (TypeError, ValueError):
    _OPEN_TAKES_CONTEXT = False


class Session:
    """open_url(url, ...) with the same defaults (certificates verified), the context made once, when first needed."""

    def __init__(self):
        self._context = None

    def open_url(self, url, data=None, headers=None, method=None, timeout=10, http_agent=None):
        extra = {}
        if _OPEN_TAKES_CONTEXT:
            if self._context is None:
                self._context = make_context()
            extra["context"] = self._context
        return Request().open(method or ("POST" if data else "GET"), url, data=data, headers=headers,
                              timeout=timeout, http_agent=http_agent, **extra)


def transient(exc):
    """Whether a failed request is worth asking again: a server error, too many requests, or no answer at all."""
    if isinstance(exc, HTTPError):
        return exc.code >= 500 or exc.code == 429
    return isinstance(exc, (URLError, OSError))


def retrying(call, retries=None, delay=None):
    """call()'s answer; where it raises a transient failure, it is called again, up to `retries` more times, after a
    doubling delay. The last failure is raised with the number of times it was asked as its attribute ``asked``."""
    retries = RETRIES if retries is None else retries
    delay = RETRY_DELAY if delay is None else delay
    asked = 1
    while True:
        try:
            return call()
        except (HTTPError, URLError, OSError, ValueError) as exc:
            if asked > retries or not transient(exc):
                exc.asked = asked
                raise
        time.sleep(delay)
        delay, asked = delay * 2, asked + 1


def times(n):
    return "once" if n == 1 else f"{n} times"


def secret_problem(value, option):
    """Why a key or token cannot go into an HTTP header (a control character: a newline would end the header), in
    words that name the option and never the value; None when it can."""
    if value and any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return (f"{option} holds a control character (a newline, a tab, ...), which no HTTP header can carry; "
                "its value is not shown. Set it without one (a key read from a file often ends in a newline).")
    return None
