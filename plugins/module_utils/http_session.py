# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""open_url's requests with one TLS context for a module's whole run.

ansible.module_utils.urls.open_url builds a new SSL context, loading the system's certificate store, for every
request, even a plain http one: about 50 ms each. verify's probe asks its server ten times in one round trip
(the endpoints, a chat completion, the fingerprint's prompts); one context serves them all.
"""

from __future__ import annotations

import inspect

from ansible.module_utils.urls import Request, make_context

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


def secret_problem(value, option):
    """Why a key or token cannot go into an HTTP header (a control character: a newline would end the header), in
    words that name the option and never the value; None when it can."""
    if value and any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return (f"{option} holds a control character (a newline, a tab, ...), which no HTTP header can carry; "
                "its value is not shown. Set it without one (a key read from a file often ends in a newline).")
    return None
