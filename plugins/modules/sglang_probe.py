#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_probe
short_description: Read a host's GPUs, release, service and server as verify judges them, in one round trip
version_added: 0.4.0
description:
  - Reads, in one call, what the verify role judges of an sglang host - the GPUs and driver
    (O(gpu), as M(blackwell.serving.gpu_facts) reads them), the release links (O(links), resolved as
    M(ansible.builtin.stat) resolves them), whether files exist (O(exists)), the packages of a Python environment
    (O(python)), the SM120 judgement of the release's tree (O(sm120), as M(blackwell.serving.sglang_sm120_check)
    makes it), the model's weights against their revision's manifest (O(model), as M(blackwell.serving.model_snapshot)
    with C(state=checked) judges them), the state of a systemd unit (O(unit)), the status of each of the server's
    O(paths), and one chat completion (O(chat)).
  - Each part is asked only when its option is given (the server only with O(url)); each answers what it found,
    never fails the task (the judge says what is wrong). A converged host pays one round trip instead of one per probe.
  - Reads only; never changes anything.
author: blackwell.serving maintainers (!UNKNOWN)
extends_documentation_fragment:
  - blackwell.serving.sglang_api
options:
  gpu:
    description:
      - Also read the GPUs and driver as M(blackwell.serving.gpu_facts) reads them, with these of its options (checked
        against its argument spec; C({}) for its defaults); RV(gpu) and the fact C(nvidia_gpu) answer. Nothing when
        left out.
    type: dict
  sm120:
    description:
      - Also judge an sglang tree for the SM120 fix as M(blackwell.serving.sglang_sm120_check) judges it, with these
        of its options (checked against its argument spec); RV(sm120) answers. Where its C(path) does not exist there
        is no release to judge (an empty RV(sm120)); its C(model_path) is read where that directory has a
        C(config.json), else the default head sizes are judged. Nothing when left out.
    type: dict
  model:
    description:
      - Also judge the model's weights against their revision's manifest as M(blackwell.serving.model_snapshot) with
        C(state=checked) judges them (every file that differs from the marker's record of it is hashed; nothing is
        written); RV(model) answers. Nothing when left out.
    type: dict
    suboptions:
      path:
        description: O(blackwell.serving.model_snapshot#module:path).
        type: path
        required: true
      repo_id:
        description: O(blackwell.serving.model_snapshot#module:repo_id).
        type: str
        required: true
      revision:
        description: O(blackwell.serving.model_snapshot#module:revision).
        type: str
        required: true
      endpoint:
        description: O(blackwell.serving.model_snapshot#module:endpoint).
        type: str
        default: https://huggingface.co
      token:
        description: O(blackwell.serving.model_snapshot#module:token).
        type: str
      timeout:
        description: O(blackwell.serving.model_snapshot#module:timeout).
        type: int
        default: 60
  url:
    default: ""
  timeout:
    description: Seconds to wait for each of O(paths).
    default: 30
  paths:
    description: Paths asked with C(GET), each judged by its status.
    type: list
    elements: str
    default: []
  chat:
    description:
      - The body of one chat completion, C(POST)ed as JSON to C(/v1/chat/completions) (model, messages,
        max_tokens, temperature, ...); none when left out.
    type: dict
  chat_timeout:
    description: Seconds to wait for the chat completion.
    type: int
    default: 300
  fingerprint:
    description:
      - Also take the server's greedy fingerprint, as M(blackwell.serving.sglang_fingerprint) takes it (the same
        requests to C(/generate), one prompt at a time); none when left out.
    type: dict
    suboptions:
      prompts:
        description: O(blackwell.serving.sglang_fingerprint#module:prompts).
        type: list
        elements: str
        required: true
      max_new_tokens:
        description: O(blackwell.serving.sglang_fingerprint#module:max_new_tokens).
        type: int
        default: 32
      seed:
        description: O(blackwell.serving.sglang_fingerprint#module:seed).
        type: int
        default: 1234
      timeout:
        description: O(blackwell.serving.sglang_fingerprint#module:timeout).
        type: int
        default: 120
  unit:
    description: A systemd unit whose C(ActiveState) and text (with its drop-ins) are read; empty for none.
    type: str
    default: ""
  links:
    description: Paths whose link targets are read, resolved to absolute paths (C(lnk_source) of M(ansible.builtin.stat)).
    type: list
    elements: path
    default: []
  exists:
    description: Paths, each said to exist or not (a link counts, whatever it points at, as M(ansible.builtin.stat) says).
    type: list
    elements: path
    default: []
  python:
    description:
      - A Python interpreter whose environment's distributions are listed (name lower-cased, C(_) as C(-));
        nothing when it is left out, and an empty list when it does not run.
    type: path
  native_packages:
    description:
      - Top-level packages of the environment of O(python) (C(torch), C(sgl_kernel), C(nvidia), ...) whose shared
        objects must load - every library they need (C(DT_NEEDED)) is looked up as the dynamic loader would, in
        their own run paths, the libraries that the environment's imports load first (C(torch/lib),
        C(nvidia/*/lib), a package's C(.libs)) and the system's (C(ldconfig -p), the default directories), and
        each that stays missing is named (RV(native_libraries)). Empty for none.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    description: Runs in check mode as without it (it only reads).
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
seealso:
  - module: blackwell.serving.sglang_health
  - module: blackwell.serving.sglang_fingerprint
  - module: blackwell.serving.gpu_facts
  - name: sglang's HTTP endpoints
    description: C(/health), C(/get_model_info) and the OpenAI-compatible C(/v1/models) and C(/v1/chat/completions).
    link: https://docs.sglang.io/basic_usage/native_api.html
"""

EXAMPLES = r"""
- name: The release in service, its unit and its server
  blackwell.serving.sglang_probe:
    links: [/opt/sglang/current, /etc/sglang/deployed/release]
    exists: [/srv/models/GLM-5-NVFP4/config.json]
    python: /opt/sglang/current/venv/bin/python
    unit: sglang.service
    url: http://127.0.0.1:30000
    api_key: "{{ sglang_service_api_key }}"
    paths: [/health, /v1/models, /get_model_info]
    chat:
      model: glm-5
      messages: [{role: user, content: "What is the capital of France?"}]
      max_tokens: 64
      temperature: 0
  register: probe
"""

RETURN = r"""
links:
  description: Each of O(links) with the absolute path its link resolves to, or null where it is no link.
  returned: always
  type: dict
  sample: {/opt/sglang/current: /opt/sglang/releases/0123456789ab-0f1e2d3c4b5a}
exists:
  description: Each of O(exists), and whether it exists (links not followed).
  returned: always
  type: dict
  sample: {/srv/models/GLM-5-NVFP4/config.json: true}
packages:
  description: The environment's distributions and their versions, with O(python); empty when it did not run.
  returned: when O(python) is given
  type: dict
  sample: {numpy: 2.2.6, packaging: "25.0"}
native_libraries:
  description:
    - With O(native_packages), the shared objects read (C(objects)), the libraries that stay missing, each with the
      objects that need it (C(missing)), and the objects that could not be read (C(unreadable)); paths relative to
      the environment's site-packages. Null where O(python) is no virtual environment's interpreter.
  returned: when O(native_packages) is given
  type: dict
  sample: {objects: 412, missing: [{library: libnuma.so.1, needed_by: [sgl_kernel/sm100/common_ops.abi3.so]}],
           unreadable: []}
unit_state:
  description: The unit's C(ActiveState), or null when systemd did not answer.
  returned: when O(unit) is given
  type: str
  sample: active
unit_text:
  description:
    - The unit as systemd runs it - its file and its drop-ins, as C(systemctl cat) prints them - or null when
      systemd did not answer or has no such unit.
  returned: when O(unit) is given
  type: str
  sample: "# /etc/systemd/system/sglang.service\n[Service]\nExecStart=/opt/sglang/current/venv/bin/python ..."
endpoints:
  description: Each of O(paths) with the status it answered, -1 where the server did not answer.
  returned: always
  type: dict
  sample: {/health: 200, /v1/models: 200, /get_model_info: 200}
chat:
  description: The chat completion's status (-1 without an answer), the first choice's text and finish reason.
  returned: when O(chat) is given
  type: dict
  sample: {status: 200, content: The capital of France is Paris., finish_reason: stop}
gpu:
  description:
    - With O(gpu), what M(blackwell.serving.gpu_facts) returns besides the fact C(nvidia_gpu) (C(kernel),
      C(kernel_module_files), C(nvcc), C(fabric), as its options asked).
  returned: when O(gpu) is given
  type: dict
  sample: {kernel: 6.8.0-90-generic, kernel_module_files: [/lib/modules/6.8.0-90-generic/updates/dkms/nvidia.ko.zst]}
ansible_facts:
  description: With O(gpu), the fact C(nvidia_gpu) as M(blackwell.serving.gpu_facts) sets it.
  returned: when O(gpu) is given
  type: dict
  sample: {nvidia_gpu: {state: ok, count: 8}}
model:
  description:
    - With O(model), what M(blackwell.serving.model_snapshot) with C(state=checked) returns (C(complete),
      C(marker_matches_manifest), C(missing), C(wrong_size), C(wrong_hash), C(hashed), ...); C(msg) alone where the
      manifest could not be read or an option is wrong.
  returned: when O(model) is given
  type: dict
  sample: {complete: true, marker_matches_manifest: true, files: 3, hashed: []}
sm120:
  description:
    - With O(sm120), what M(blackwell.serving.sglang_sm120_check) returns; C(error) instead where it could not judge
      (its message), and empty where there is no tree at O(sm120)'s C(path).
  returned: when O(sm120) is given
  type: dict
  sample: {present: true, judge: compiler, head: 0123456789abcdef0123456789abcdef01234567, fix_commit_ancestor: true}
fingerprint:
  description:
    - What M(blackwell.serving.sglang_fingerprint) returns, with O(fingerprint) - the fingerprint, the requests
      sent and the seconds they took; where a prompt got no readable answer, a message (msg) instead of the
      fingerprint.
  returned: when O(fingerprint) is given
  type: dict
  sample:
    requests: 6
    seconds: 0.013
    fingerprint: {format: 1, settings: {max_new_tokens: 32, seed: 1234}, prompts: [{id: 5d41402abc4b2a76, tokens: [578],
                  logprobs: [-0.0213], runner_up: [[264, -4.12]]}]}
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.blackwell.serving.plugins.module_utils import gpu_facts, model_check, native_libs, sm120_check
from ansible_collections.blackwell.serving.plugins.module_utils import sglang_probe as probe
from ansible_collections.blackwell.serving.plugins.module_utils.http_session import Session, secret_problem
from ansible_collections.blackwell.serving.plugins.module_utils.fingerprint import take


# one TLS context for every request of this run (module_utils/http_session.py)
SESSION = Session()


def ask(p, path, *, body=None, timeout):
    """(status, body bytes) of one request; status -1 when the server did not answer (as uri says)."""
    headers = {"Authorization": f"Bearer {p['api_key']}"} if p["api_key"] else {}
    data = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body)
    try:
        resp = SESSION.open_url(p["url"].rstrip("/") + path, data=data, headers=headers, timeout=timeout,
                                method="POST" if body is not None else "GET", http_agent="blackwell.serving sglang_probe")
        return resp.getcode(), resp.read()
    except Exception as exc:  # HTTPError carries a status and a body; a refused connection neither
        code = getattr(exc, "code", None)
        if code is None:
            return -1, b""
        try:
            return code, exc.read()
        except Exception:
            return code, b""


def suboptions(module, name, spec):
    """Option NAME (a dict) checked against the argument spec of the module it stands for, with its defaults."""
    checked = ArgumentSpecValidator(spec).validate(module.params[name])
    if checked.error_messages:
        module.fail_json(msg=f"{name}: " + "; ".join(checked.error_messages))
    return checked.validated_parameters


def judge_sm120(module, p):
    """sglang_sm120_check's verdict on the tree at p's path; {} where there is none, error where it cannot judge."""
    if not os.path.lexists(p["path"]):
        return {}
    if p["model_path"] and not os.path.exists(os.path.join(p["model_path"], "config.json")):
        p = dict(p, model_path=None)
    try:
        return sm120_check.check(module, p)
    except Exception as exc:  # the judge says what is wrong; the probe never fails for it
        return {"error": str(exc) or type(exc).__name__}


def check_model(p):
    """model_snapshot's state=checked answer; its message alone where it would have failed."""
    problem = model_check.input_problem(p)
    if problem:
        return {"msg": problem}
    try:
        return model_check.check(p, "blackwell.serving sglang_probe")
    except model_check.ListingError as exc:
        return {"msg": str(exc)}
    except Exception as exc:  # reading the copy failed: the judge says so; the probe never fails for it
        return {"msg": f"the weights at {p['path']} could not be judged: {exc or type(exc).__name__}"}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpu=dict(type="dict"),
            sm120=dict(type="dict"),
            model=dict(type="dict", options=model_check.SPEC),
            url=dict(type="str", default=""),
            api_key=dict(type="str", no_log=True),
            timeout=dict(type="int", default=30),
            paths=dict(type="list", elements="str", default=[]),
            chat=dict(type="dict"),
            chat_timeout=dict(type="int", default=300),
            fingerprint=dict(type="dict", options=dict(
                prompts=dict(type="list", elements="str", required=True),
                max_new_tokens=dict(type="int", default=32, no_log=False),
                seed=dict(type="int", default=1234),
                timeout=dict(type="int", default=120),
            )),
            unit=dict(type="str", default=""),
            links=dict(type="list", elements="path", default=[]),
            exists=dict(type="list", elements="path", default=[]),
            python=dict(type="path"),
            native_packages=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if secret_problem(p["api_key"], "api_key"):
        module.fail_json(msg=secret_problem(p["api_key"], "api_key"))
    gpu = suboptions(module, "gpu", gpu_facts.SPEC) if p["gpu"] is not None else None
    sm120 = suboptions(module, "sm120", sm120_check.SPEC) if p["sm120"] is not None else None
    result = dict(changed=False,
                  links={path: os.path.realpath(path) if os.path.islink(path) else None for path in p["links"]},
                  exists={path: os.path.lexists(path) for path in p["exists"]},
                  endpoints={})
    if gpu is not None:
        result["gpu"] = gpu_facts.read(module, gpu)
        result["ansible_facts"] = result["gpu"].pop("ansible_facts")
    if sm120 is not None:
        result["sm120"] = judge_sm120(module, sm120)
    if p["model"] is not None:
        result["model"] = check_model(p["model"])
    if p["python"]:
        if os.path.exists(p["python"]):
            rc, out, _err = module.run_command([p["python"], "-c", probe.PACKAGES_SCRIPT])
            result["packages"] = probe.parse_packages(rc, out)
        else:
            result["packages"] = {}
    if p["native_packages"]:
        result["native_libraries"] = None
        site = native_libs.site_packages(p["python"]) if p["python"] else None
        if site:
            ldconfig = module.get_bin_path("ldconfig")  # PATH, then the sbin directories
            cache = {}
            if ldconfig:
                rc, out, _err = module.run_command([ldconfig, "-p"], environ_update={"LC_ALL": "C"})
                cache = native_libs.parse_ldconfig(out) if rc == 0 else {}
            result["native_libraries"] = native_libs.check(site, p["native_packages"], cache)
    if p["unit"]:
        systemctl = module.get_bin_path("systemctl")
        state = None
        if systemctl:
            rc, out, _err = module.run_command([systemctl, "show", p["unit"], "--property=ActiveState"])
            state = probe.parse_active_state(out) if rc == 0 else None
        result["unit_state"] = state
        text = None
        if systemctl:
            rc, out, _err = module.run_command([systemctl, "cat", "--no-pager", p["unit"]])
            text = out if rc == 0 else None
        result["unit_text"] = text
    if p["url"]:
        for path in p["paths"]:
            result["endpoints"][path] = ask(p, path, timeout=p["timeout"])[0]
        if p["chat"] is not None:
            status, body = ask(p, "/v1/chat/completions", body=p["chat"], timeout=p["chat_timeout"])
            result["chat"] = probe.chat_found(status, body)
        fpr = p["fingerprint"]
        if fpr is not None:
            if not fpr["prompts"] or fpr["max_new_tokens"] < 1:
                module.fail_json(msg="a fingerprint needs at least one prompt and max_new_tokens of 1 or more")

            generate = p["url"].rstrip("/") + "/generate"

            def post(body):
                # as sglang_fingerprint asks: any failure (a status, no answer, no JSON) is the take's message
                headers = {"Content-Type": "application/json"}
                if p["api_key"]:
                    headers["Authorization"] = f"Bearer {p['api_key']}"
                resp = SESSION.open_url(generate, data=json.dumps(body), headers=headers, method="POST",
                                        timeout=fpr["timeout"], http_agent="blackwell.serving sglang_probe")
                return json.loads(resp.read())

            result["fingerprint"] = take(post, generate, fpr["prompts"], fpr["max_new_tokens"], fpr["seed"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
