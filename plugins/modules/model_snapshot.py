#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
module: model_snapshot
short_description: Judge a local copy of a Hugging Face model repository against one revision's manifest
version_added: 0.2.0
description:
  - Lists the files of O(repo_id) at O(revision) from the Hub (or a mirror at O(endpoint)) and compares the
    directory O(path) with that list. A page of the listing that the Hub answers with a server error (5xx) or 429
    (its rate limit), or does not answer, is asked again up to 3 times, after 1, 2 and 4 seconds.
  - With O(state=inspect) (the default) it compares sizes only and reports what is missing, how many bytes a
    download still needs and how many are free where O(path) lives. It changes nothing.
  - With O(state=verified) it checks every file's content (SHA-256 for large files, the git blob id for small
    ones) and, when all match, writes a marker file in O(path) that records the revision and its manifest. It
    fails, naming the files, when any is missing or differs.
  - The marker keeps, per file, its size, modification and change times, inode and content hash as found when the
    content matched. Once the marker is there and every file is as recorded, the snapshot is complete without
    reading the files or asking the Hub, so a converged host makes no request. A file that differs from its
    record (re-downloaded, rewritten, touched) is hashed again; a file the run wrote is always hashed.
  - With O(state=checked) (the verify role's model check) it changes nothing. It compares the marker with the
    revision's manifest from the Hub, hashes every file that differs from its record, and with O(rehash) every
    file, writing its progress to O(progress_file).
author: blackwell.serving maintainers (!UNKNOWN)
options:
  path:
    description: The local directory that holds (or will hold) the snapshot.
    type: path
    required: true
  repo_id:
    description: The model repository, C(ORG/NAME).
    type: str
    required: true
  revision:
    description: The revision, a full 40-hex commit id.
    type: str
    required: true
  endpoint:
    description: The Hub's address, or a mirror's.
    type: str
    default: https://huggingface.co
  token:
    description: An access token for gated or private repositories; never logged.
    type: str
  state:
    description:
      - C(inspect) reports; C(verified) checks the content and records the marker; C(checked) judges the
        recorded snapshot against the revision's manifest and writes nothing.
    type: str
    choices: [inspect, verified, checked]
    default: inspect
  rehash:
    description: With O(state=verified) or O(state=checked), read every file, not only those that differ from the marker.
    type: bool
    default: false
  repair:
    description:
      - With O(state=verified), remove the files of wrong content (and the download client's record of each) instead
        of failing, so that a download fetches them again, and add them to C(.blackwell-repairs.json) in O(path)
        (the service that reads the directory restarts when that file changed since it started). Returns them in
        RV(removed); in check mode names them and removes nothing.
    type: bool
    default: false
  progress_file:
    description: While hashing, write the bytes hashed so far to this file (for a progress display); removed at the end.
    type: path
  checksum:
    description:
      - With O(state=verified), check each file's content, not only its size, before recording the snapshot.
    type: bool
    default: true
  timeout:
    description: Seconds to wait for the Hub's answer.
    type: int
    default: 60
attributes:
  check_mode:
    description: Reports in check mode what it would record; writes nothing.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
seealso:
  - module: blackwell.serving.download_progress
  - name: Hugging Face Hub API
    description: The repository tree listing (C(/api/models/ORG/NAME/tree/REVISION)) the manifest is read from.
    link: https://huggingface.co/docs/hub/api
"""

EXAMPLES = r"""
- name: What a download would need
  blackwell.serving.model_snapshot:
    path: /srv/models/GLM-5-NVFP4
    repo_id: lukealonso/GLM-5-NVFP4
    revision: "{{ model_weights_revision }}"
  register: snap

- name: Verify every file and record the snapshot
  blackwell.serving.model_snapshot:
    path: /srv/models/GLM-5-NVFP4
    repo_id: lukealonso/GLM-5-NVFP4
    revision: "{{ model_weights_revision }}"
    state: verified
"""

RETURN = r"""
complete:
  description: Whether every file of the revision is there (with O(state=verified), with the right content).
  returned: always
  type: bool
  sample: true
source:
  description: C(marker) when the recorded marker decided, C(hub) when the manifest was fetched.
  returned: always
  type: str
  sample: marker
files:
  description: Number of files in the revision.
  returned: always
  type: int
  sample: 96
total_bytes:
  description: Size of the revision.
  returned: always
  type: int
  sample: 440234567890
needed_bytes:
  description: Bytes of the files that are missing or differ.
  returned: always
  type: int
  sample: 0
free_bytes:
  description: Free bytes on the file system that holds O(path) (or its nearest existing parent).
  returned: always
  type: int
  sample: 1099511627776
missing:
  description: Files not there.
  returned: always
  type: list
  elements: str
  sample: []
wrong_size:
  description: Files whose size differs from the manifest (an interrupted download, say).
  returned: always
  type: list
  elements: str
  sample: [model-00017-of-00096.safetensors]
wrong_hash:
  description: Files of the right size whose content differs (only with O(state=verified)).
  returned: always
  type: list
  elements: str
  sample: []
extra:
  description: Files under O(path) that the revision does not list.
  returned: always
  type: list
  elements: str
  sample: []
changed_files:
  description: Files that differ from the marker's record of them (hashed again when content is checked).
  returned: always
  type: list
  elements: str
  sample: [model-00002-of-00003.safetensors]
hashed:
  description: Files whose content this run read.
  returned: always
  type: list
  elements: str
  sample: [model-00002-of-00003.safetensors]
removed:
  description: With O(repair), the files of wrong content removed to be fetched again (in check mode, to be removed).
  returned: always
  type: list
  elements: str
  sample: [model-00002-of-00003.safetensors]
marker_matches_manifest:
  description: With O(state=checked), whether the marker records the revision's manifest as the Hub lists it.
  returned: when O(state=checked)
  type: bool
  sample: true
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.serving.plugins.module_utils import model_check, snapshot

AGENT = "blackwell.serving model_snapshot"


def free_bytes(path):
    p = path
    while not os.path.exists(p):
        p = os.path.dirname(p)
    st = os.statvfs(p)
    return st.f_bavail * st.f_frsize


def main():
    module = AnsibleModule(
        argument_spec=dict(
            model_check.SPEC,
            state=dict(type="str", choices=["inspect", "verified", "checked"], default="inspect"),
            checksum=dict(type="bool", default=True),
            rehash=dict(type="bool", default=False),
            repair=dict(type="bool", default=False),
            progress_file=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    problem = model_check.input_problem(p)
    if problem:
        module.fail_json(msg=problem)
    root = p["path"]
    state = p["state"]
    record = state == "verified"
    verify = state == "checked" or (record and p["checksum"])
    result = dict(changed=False, free_bytes=free_bytes(root), extra=[], changed_files=[], hashed=[], removed=[])

    if state == "checked":
        progress = (lambda total: progress_writer(p["progress_file"], total)) if p["progress_file"] else None
        try:
            result.update(model_check.check(p, AGENT, rehash=p["rehash"], progress=progress))
        except model_check.ListingError as exc:
            module.fail_json(msg=str(exc), **result)
        module.exit_json(**result)

    marker = snapshot.read_marker(root) if os.path.isdir(root) else None
    matches = snapshot.marker_matches(marker, p["repo_id"], p["revision"])
    recorded = marker.get("files") if matches else None
    if matches and not p["rehash"]:
        done, quick = snapshot.as_recorded(root, marker)
        if done:
            result.update(model_check.public(quick), source="marker")
            module.exit_json(**result)

    try:
        manifest = model_check.fetch_manifest(p, AGENT)
    except Exception as exc:  # urllib's errors, a proxy's, a bad JSON body: say which request failed
        module.fail_json(msg=model_check.listing_error(p, exc), **result)

    progress = progress_writer(p["progress_file"], sum(e["size"] for e in manifest)) if verify and p["progress_file"] \
        and not module.check_mode else None
    try:
        judged = snapshot.judge(root, manifest, verify=verify, recorded=recorded, rehash=p["rehash"], progress=progress)
    finally:
        if progress:
            progress.close()
    result.update(model_check.public(judged), source="hub")
    result["extra"] = snapshot.extra_files(root, manifest) if os.path.isdir(root) else []
    if not record:
        module.exit_json(**result)
    if p["repair"] and judged["wrong_hash"]:
        result["changed"] = True
        result["removed"] = judged["wrong_hash"] if module.check_mode else \
            snapshot.remove_for_repair(root, judged["wrong_hash"], time.time())
        module.exit_json(**result)
    if not judged["complete"]:
        module.fail_json(msg=f"{root} does not hold {p['repo_id']} at {p['revision']}: missing {judged['missing']}, "
                             f"wrong size {judged['wrong_size']}, wrong content {judged['wrong_hash']}. Nothing was "
                             f"recorded. Remove the files of wrong content, then run again to download them anew.",
                         **result)
    content = snapshot.marker_content(p["repo_id"], p["revision"], manifest, judged["records"])
    old = None
    try:
        with open(os.path.join(root, snapshot.MARKER), encoding="utf-8") as fh:
            old = fh.read()
    except OSError:
        pass
    if content != old:
        if not module.check_mode:
            tmp = os.path.join(root, snapshot.MARKER + ".tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(content)
            os.chmod(tmp, 0o644)
            os.replace(tmp, os.path.join(root, snapshot.MARKER))
        result["changed"] = True
    module.exit_json(**result)


class progress_writer:
    """Writes the bytes hashed so far and the total to a file, at most every few seconds."""

    def __init__(self, path, total, every=2.0):
        self.path, self.total, self.every, self.last = path, total, every, 0.0

    def __call__(self, done):
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            tmp = self.path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(f"{done} {self.total}\n")
            os.replace(tmp, self.path)

    def close(self):
        try:
            os.unlink(self.path)
        except OSError:
            pass


if __name__ == "__main__":
    main()
