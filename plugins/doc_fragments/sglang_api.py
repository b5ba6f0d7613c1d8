# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations


class ModuleDocFragment:
    """The options of the modules that talk to an sglang server or its router over HTTP."""

    DOCUMENTATION = r"""
options:
  url:
    description: The sglang server's base address, for example C(http://127.0.0.1:30000).
    type: str
  api_key:
    description:
      - The server's API key (its C(--api-key)), sent as a bearer token; never logged.
      - An sglang-router started with the servers' key asks for it too.
    type: str
  timeout:
    description: Seconds to wait for an answer.
    type: int
"""
