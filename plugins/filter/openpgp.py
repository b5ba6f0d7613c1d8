# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Jinja filter: the fingerprints of the OpenPGP keys in a key file (RFC 4880 version 4 keys).

A repository key fetched from a URL is only as good as the URL; pinning its fingerprint makes a changed or
substituted key stop the play before apt trusts it. Pure Python on the controller: no gpg on the host, and
check mode sees the same answer as a real run.
"""

from __future__ import annotations

import base64
import binascii
import hashlib

from ansible.errors import AnsibleFilterError

_PUBLIC_KEY_TAGS = (6, 14)  # public key, public subkey


def _dearmor(text):
    lines = text.strip().splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("-----BEGIN PGP PUBLIC KEY BLOCK"))
    except StopIteration:
        raise AnsibleFilterError("openpgp_fingerprints: no 'BEGIN PGP PUBLIC KEY BLOCK' in the key file")
    body = []
    in_headers = True
    for line in lines[start + 1:]:
        line = line.strip()
        if line.startswith("-----END PGP"):
            break
        if in_headers:
            if not line:
                in_headers = False
            elif ":" not in line:
                in_headers = False
                body.append(line)
            continue
        if line.startswith("="):  # the CRC-24 checksum line
            continue
        body.append(line)
    try:
        return base64.b64decode("".join(body), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise AnsibleFilterError(f"openpgp_fingerprints: the armored key is not valid base64 ({exc})")


def _packets(data):
    i = 0
    while i < len(data):
        head = data[i]
        if not head & 0x80:
            raise AnsibleFilterError(f"openpgp_fingerprints: not an OpenPGP packet at byte {i}")
        if head & 0x40:  # new format
            tag = head & 0x3F
            first = data[i + 1]
            if first < 192:
                length, hdr = first, 2
            elif first < 224:
                length, hdr = ((first - 192) << 8) + data[i + 2] + 192, 3
            elif first == 255:
                length, hdr = int.from_bytes(data[i + 2:i + 6], "big"), 6
            else:
                raise AnsibleFilterError("openpgp_fingerprints: partial body lengths are not used in key files")
        else:  # old format
            tag = (head >> 2) & 0x0F
            ltype = head & 0x03
            if ltype == 3:
                raise AnsibleFilterError("openpgp_fingerprints: indeterminate packet length")
            n = (1, 2, 4)[ltype]
            length, hdr = int.from_bytes(data[i + 1:i + 1 + n], "big"), 1 + n
        body = data[i + hdr:i + hdr + length]
        if len(body) != length:
            raise AnsibleFilterError("openpgp_fingerprints: the key file is truncated")
        yield tag, body
        i += hdr + length


def openpgp_fingerprints(key, subkeys=False, strict=True):
    """Upper-case hex fingerprints of the primary keys (and subkeys if asked) in an armored key file, or in a
    binary keyring given as base64 (what ansible.builtin.slurp returns). Not strict: a file that is no key file
    (an installed file someone replaced, an empty one) has no fingerprints, instead of an error."""
    if not strict:
        try:
            return openpgp_fingerprints(key, subkeys)
        except (AnsibleFilterError, IndexError, ValueError):  # a truncated packet header ends in IndexError
            return []
    if isinstance(key, bytes):
        data = key
    elif "-----BEGIN PGP" in str(key):
        data = _dearmor(str(key))
    else:
        try:
            data = base64.b64decode(str(key), validate=True)
        except (binascii.Error, ValueError):
            raise AnsibleFilterError("openpgp_fingerprints: expected an armored key or a base64 binary keyring")
    out = []
    for tag, body in _packets(data):
        if tag not in _PUBLIC_KEY_TAGS or (tag == 14 and not subkeys):
            continue
        if not body or body[0] != 4:
            raise AnsibleFilterError(f"openpgp_fingerprints: key version {body[:1].hex() or 'none'} "
                                     "(only version 4 keys are read)")
        out.append(hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper())
    return out


class FilterModule:
    def filters(self):
        return {"openpgp_fingerprints": openpgp_fingerprints}
