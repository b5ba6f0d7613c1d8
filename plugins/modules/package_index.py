#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
module: package_index
short_description: Whether the configured Python package indexes offer pinned versions, as uv would pick them
version_added: 0.5.0
description:
  - Asks each index, in the order uv searches them, for each project's page (PEP 691 JSON where the index answers
    it, else PEP 503 HTML) and judges each pinned version on the first index that has the project at all, as uv's
    default index strategy (C(first-index)) does. A version that only a later index offers is not found.
  - Reads only; installs nothing. Run on the host that will install, so that its network path, proxy and
    certificate store are the ones judged.
author: blackwell.serving maintainers (!UNKNOWN)
seealso:
  - name: uv's index strategy
    description: How uv picks the index it takes each package from (first-index by default).
    link: https://docs.astral.sh/uv/concepts/indexes/#searching-across-multiple-indexes
  - name: PEP 691 - JSON-based Simple API for Python Package Indexes
    description: The page form asked for first; PEP 503's HTML is read where an index answers only that.
    link: https://peps.python.org/pep-0691/
options:
  indexes:
    description: The simple indexes' URLs, in uv's order (C(--index) ones first, then C(--default-index)).
    type: list
    elements: str
    required: true
  requirements:
    description: The pinned requirements, each C(name==version).
    type: list
    elements: str
    required: true
  timeout:
    description: Seconds to wait for each page.
    type: int
    default: 30
  retries:
    description:
      - How many times a page is asked again after a transient failure - a server error (5xx), 429, or no answer -
        as uv retries them (3 by default); a 404 or another 4xx is an answer.
    type: int
    default: 3
  retry_delay:
    description: Seconds before the first retry; each later one waits twice as long.
    type: float
    default: 1.0
attributes:
  check_mode:
    description: Reads only.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
"""

EXAMPLES = r"""
- name: The pinned versions are on the indexes uv will use
  blackwell.serving.package_index:
    indexes: [https://download.pytorch.org/whl/cu129, https://pypi.org/simple]
    requirements: [transformers==4.57.1]
  register: offered
"""

RETURN = r"""
requirements:
  description: Each requirement as asked, with what the indexes answered.
  returned: always
  type: list
  elements: dict
  sample: [{requirement: transformers==4.57.1, name: transformers, version: 4.57.1, index: "https://pypi.org/simple",
             offered: [4.56.2, 4.57.1], found: true}]
  contains:
    requirement: {description: The requirement as asked., type: str, sample: transformers==4.57.1}
    name: {description: The project., type: str, sample: transformers}
    version: {description: The version pinned., type: str, sample: 4.57.1}
    index:
      description: The index uv would take it from (the first that has the project); null when none has it.
      type: str
      sample: https://pypi.org/simple
    offered:
      description: The versions that index offers, oldest first.
      type: list
      elements: str
      sample: [4.56.2, 4.57.1]
    found: {description: Whether it offers the pinned version., type: bool, sample: true}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError

from ansible_collections.blackwell.serving.plugins.module_utils import package_index
from ansible_collections.blackwell.serving.plugins.module_utils.http_session import Session, retrying, times


def ask(session, url, params):
    """The page at url, as (body, content type); a transient failure is asked again (http_session.retrying)."""
    def page():
        resp = session.open_url(url, headers={"Accept": package_index.ACCEPT}, timeout=params["timeout"])
        return resp.read().decode("utf-8", "replace"), resp.headers.get("Content-Type", "")
    return retrying(page, params["retries"], params["retry_delay"])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            indexes=dict(type="list", elements="str", required=True),
            requirements=dict(type="list", elements="str", required=True),
            timeout=dict(type="int", default=30),
            retries=dict(type="int", default=3),
            retry_delay=dict(type="float", default=1.0),
        ),
        supports_check_mode=True,
    )
    session = Session()
    out = []
    for requirement in module.params["requirements"]:
        name, sep, version = requirement.partition("==")
        if not sep or not name.strip() or not version.strip():
            module.fail_json(msg=f"requirement {requirement!r} is not name==version")
        req = {"requirement": requirement, "name": name.strip(), "version": version.strip()}
        pages = []
        for index in module.params["indexes"]:
            url = f"{index.rstrip('/')}/{package_index.normalize(req['name'])}/"
            try:
                body, kind = ask(session, url, module.params)
                pages.append((index, package_index.filenames(body, kind)))
            except HTTPError as exc:
                if exc.code == 404:
                    pages.append((index, None))
                    continue
                module.fail_json(msg=f"the package index {index} answered {exc.code} for {req['name']} ({url}; asked "
                                     f"{times(exc.asked)}): uv could not install from it either. Check the index URL "
                                     "and the network path from this host.", url=url, status=exc.code)
            except (URLError, OSError, ValueError) as exc:
                module.fail_json(msg=f"the package index {index} could not be read for {req['name']} ({url}; asked "
                                     f"{times(exc.asked)}): {exc}. uv could not install from it either. Check the index "
                                     "URL and the network path from this host (proxy, certificates).", url=url)
        out.append(dict(req, **package_index.judge(req, pages)))
    module.exit_json(changed=False, requirements=out)


if __name__ == "__main__":
    main()
