#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_fingerprint
short_description: Take a greedy fingerprint of an sglang server's answers
version_added: 0.3.0
description:
  - Sends each of O(prompts) to the server's native C(/generate) endpoint, one at a time, with greedy decoding
    (temperature 0, O(seed), O(max_new_tokens) tokens, end-of-sequence ignored) and asks for the log-probability
    of each generated token and of the runner-up at each position.
  - Returns the generated token ids and log-probabilities as the server's fingerprint. Hosts that run the same
    model on correct kernels give the same tokens; a host whose kernels compute garbage gives others. The
    filter P(blackwell.serving.fingerprint_judge#filter) compares fingerprints by a written rule.
  - Reads only; never changes anything on the host.
author: blackwell.serving maintainers (!UNKNOWN)
extends_documentation_fragment:
  - blackwell.serving.sglang_api
options:
  url:
    required: true
  prompts:
    description: The prompts, sent as raw text (no chat template), in this order.
    type: list
    elements: str
    required: true
  max_new_tokens:
    description: Tokens generated per prompt.
    type: int
    default: 32
  seed:
    description: The sampling seed sent with each request (greedy decoding does not draw, but a server that
      samples anyway draws the same).
    type: int
    default: 1234
  timeout:
    description: Seconds to wait for each answer.
    default: 120
attributes:
  check_mode:
    description: Runs in check mode as without it (it only reads).
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
seealso:
  - module: blackwell.serving.sglang_health
  - name: sglang's native generate API
    description: The C(/generate) endpoint and its sampling parameters, as sglang documents them.
    link: https://docs.sglang.io/basic_usage/native_api.html
"""

EXAMPLES = r"""
- name: Fingerprint the server
  blackwell.serving.sglang_fingerprint:
    url: http://127.0.0.1:30000
    api_key: "{{ sglang_service_api_key }}"
    prompts:
      - "The capital of France is"
      - "def fibonacci(n):"
  register: probe
"""

RETURN = r"""
fingerprint:
  description: What the server generated.
  returned: success
  type: dict
  sample:
    format: 1
    settings: {max_new_tokens: 32, seed: 1234}
    prompts:
      - id: 5d41402abc4b2a76
        tokens: [578, 6864, 315]
        logprobs: [-0.0213, -0.1402, -0.0008]
        runner_up: [[264, -4.12], [1101, -2.31], [13, -7.9]]
requests:
  description: How many requests were sent.
  returned: always
  type: int
  sample: 8
seconds:
  description: How long the probe took, in seconds.
  returned: always
  type: float
  sample: 3.42
"""

import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.serving.plugins.module_utils.fingerprint import take
from ansible_collections.blackwell.serving.plugins.module_utils.http_session import Session, secret_problem


# one TLS context for every request of this run (module_utils/http_session.py)
SESSION = Session()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            api_key=dict(type="str", no_log=True),
            prompts=dict(type="list", elements="str", required=True),
            max_new_tokens=dict(type="int", default=32, no_log=False),
            seed=dict(type="int", default=1234),
            timeout=dict(type="int", default=120),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if secret_problem(p["api_key"], "api_key"):
        module.fail_json(msg=secret_problem(p["api_key"], "api_key"))
    if not p["prompts"] or p["max_new_tokens"] < 1:
        module.fail_json(msg="sglang_fingerprint needs at least one prompt and max_new_tokens of 1 or more")
    headers = {"Content-Type": "application/json"}
    if p["api_key"]:
        headers["Authorization"] = f"Bearer {p['api_key']}"
    url = p["url"].rstrip("/") + "/generate"

    def post(body):
        resp = SESSION.open_url(url, data=json.dumps(body), headers=headers, method="POST", timeout=p["timeout"],
                                http_agent="blackwell.serving sglang_fingerprint")
        return json.loads(resp.read())

    result = take(post, url, p["prompts"], p["max_new_tokens"], p["seed"])
    if "fingerprint" not in result:
        module.fail_json(**result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
