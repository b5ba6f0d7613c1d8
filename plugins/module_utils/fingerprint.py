# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Greedy fingerprints of a server's answers, and the rule that compares them.

A fingerprint is what a server generated for a fixed set of prompts with greedy decoding
(temperature 0, a fixed seed, a fixed number of tokens, end-of-sequence ignored): per prompt,
the token ids, the log-probability of each, and the runner-up at each position (token and
log-probability). Two servers that run the same model on correct kernels produce the same
tokens; their log-probabilities differ only by numeric noise (batch shapes, reduction order).
A server whose kernels compute garbage produces other tokens, usually early and with
confidence.

The rule (every number a setting, defaults in DEFAULT_RULE):

1. Where both chose the same token, their log-probabilities of it may differ by at most
   ``logprob_tolerance`` nats.
2. Where they chose different tokens, the difference is noise only at a near-tie: one side's
   runner-up is the other side's choice, and on that side the two were within ``near_tie``
   nats; and only from position ``min_divergence_position`` on (garbage diverges early).
   After such a divergence the rest of that prompt is not compared (the contexts differ).
3. At most ``max_near_tie_divergences`` prompts may end in such a divergence.

Anything else fails, naming the prompt, the first position that differs, the tokens on both
sides and the log-probability gap. Pure Python: no Ansible imports.
"""

from __future__ import annotations

import hashlib
import json
import time

FORMAT = 1
DEFAULT_RULE = {
    "logprob_tolerance": 0.15,
    "near_tie": 0.05,
    "min_divergence_position": 8,
    "max_near_tie_divergences": 1,
}


class FingerprintError(ValueError):
    """A server's answer or a fingerprint that cannot be read."""


def prompt_id(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def generate_request(prompt, max_new_tokens, seed):
    """The body of sglang's native /generate for one greedy, fixed-length probe."""
    sampling = {"temperature": 0.0, "max_new_tokens": int(max_new_tokens), "ignore_eos": True}
    if seed is not None:
        sampling["sampling_seed"] = int(seed)
    return {"text": prompt, "sampling_params": sampling, "return_logprob": True, "top_logprobs_num": 2,
            "stream": False}


def _pair(entry):
    # sglang answers [logprob, token_id, text-or-None] per position
    try:
        return int(entry[1]), float(entry[0])
    except (TypeError, ValueError, IndexError) as exc:
        raise FingerprintError(f"a log-probability entry is not [logprob, token_id, text]: {entry!r}") from exc


def parse_generate(prompt, answer):
    """One prompt's record from sglang's /generate answer (a dict, or a one-element list)."""
    if isinstance(answer, list) and len(answer) == 1:
        answer = answer[0]
    if not isinstance(answer, dict) or not isinstance(answer.get("meta_info"), dict):
        raise FingerprintError("the answer has no meta_info: is this sglang's /generate?")
    meta = answer["meta_info"]
    chosen = meta.get("output_token_logprobs")
    if not isinstance(chosen, list) or not chosen:
        raise FingerprintError("the answer has no output_token_logprobs (return_logprob was not honoured)")
    tops = meta.get("output_top_logprobs") or [None] * len(chosen)
    tokens, logprobs, runner_up = [], [], []
    for i, entry in enumerate(chosen):
        tok, lp = _pair(entry)
        tokens.append(tok)
        logprobs.append(round(lp, 6))
        alt = None
        for cand in tops[i] or []:
            ctok, clp = _pair(cand)
            if ctok != tok:
                alt = [ctok, round(clp, 6)]
                break
        runner_up.append(alt)
    return {"id": prompt_id(prompt), "tokens": tokens, "logprobs": logprobs, "runner_up": runner_up}


def take(post, url, prompts, max_new_tokens, seed, clock=time.monotonic):
    """Probe a server: each prompt sent with ``post(body)`` (its JSON answer, or an exception), one at a time.

    Returns {fingerprint, requests, seconds}, or {msg, requests, seconds} at the first prompt without a readable
    answer. ``url`` only names the server in the message.
    """
    started = clock()
    records = []
    for i, prompt in enumerate(prompts):
        try:
            answer = post(generate_request(prompt, max_new_tokens, seed))
        except Exception as exc:  # HTTPError carries a status; a refused connection does not
            return {"msg": f"{url}: prompt {i + 1} of {len(prompts)} got no answer: "
                           f"{getattr(exc, 'code', '')} {getattr(exc, 'reason', exc)}".replace("  ", " "),
                    "requests": i + 1, "seconds": round(clock() - started, 3)}
        try:
            records.append(parse_generate(prompt, answer))
        except FingerprintError as exc:
            return {"msg": f"{url}: prompt {i + 1}: {exc}", "requests": i + 1, "seconds": round(clock() - started, 3)}
    return {"requests": len(records), "seconds": round(clock() - started, 3),
            "fingerprint": {"format": FORMAT, "prompts": records,
                            "settings": {"max_new_tokens": max_new_tokens, "seed": seed}}}


def _check_record(rec):
    n = len(rec.get("tokens", []))
    if not n or len(rec.get("logprobs", [])) != n or len(rec.get("runner_up", [])) != n:
        raise FingerprintError(f"prompt {rec.get('id')}: tokens, logprobs and runner_up differ in length")


def _near_tie(a, b, i, rule):
    """Whether a's choice at i is b's runner-up (or the reverse) within near_tie on that side."""
    for x, y in ((a, b), (b, a)):
        alt = x["runner_up"][i]
        if alt and alt[0] == y["tokens"][i] and abs(x["logprobs"][i] - alt[1]) <= rule["near_tie"]:
            return True
    return False


def _gap(ref, host, i):
    """ref's log-probability of its own token minus its log-probability of host's token, where known."""
    alt = ref["runner_up"][i]
    if alt and alt[0] == host["tokens"][i]:
        return round(ref["logprobs"][i] - alt[1], 6)
    return None


def compare(host, reference, rule=None):
    """Judge one fingerprint against another. Returns a verdict dict:

    ok, compared (prompts), tolerated (near-tie divergences), max_logprob_diff, and, when not ok,
    failure: {prompt, position, reason, host_token, reference_token, host_logprob, reference_logprob, gap}.
    """
    r = dict(DEFAULT_RULE)
    r.update({k: v for k, v in (rule or {}).items() if v is not None})
    refs = {p["id"]: p for p in reference.get("prompts", [])}
    hosts = {p["id"]: p for p in host.get("prompts", [])}
    verdict = {"ok": True, "compared": 0, "tolerated": [], "max_logprob_diff": 0.0, "failure": None}

    def fail(**kw):
        verdict["ok"] = False
        verdict["failure"] = kw
        return verdict

    if set(refs) != set(hosts):
        return fail(prompt=None, position=None, reason="the two were probed with different prompts",
                    host_token=None, reference_token=None, host_logprob=None, reference_logprob=None, gap=None)
    for pid in [p["id"] for p in reference.get("prompts", [])]:
        a, b = hosts[pid], refs[pid]
        _check_record(a)
        _check_record(b)
        verdict["compared"] += 1
        if len(a["tokens"]) != len(b["tokens"]):
            return fail(prompt=pid, position=min(len(a["tokens"]), len(b["tokens"])),
                        reason=f"{len(a['tokens'])} tokens against {len(b['tokens'])}", host_token=None,
                        reference_token=None, host_logprob=None, reference_logprob=None, gap=None)
        for i, (ta, tb) in enumerate(zip(a["tokens"], b["tokens"])):
            la, lb = a["logprobs"][i], b["logprobs"][i]
            if ta == tb:
                diff = abs(la - lb)
                verdict["max_logprob_diff"] = max(verdict["max_logprob_diff"], round(diff, 6))
                if diff > r["logprob_tolerance"]:
                    return fail(prompt=pid, position=i, reason=f"same token, log-probabilities {diff:.4f} apart "
                                f"(tolerance {r['logprob_tolerance']})", host_token=ta, reference_token=tb,
                                host_logprob=la, reference_logprob=lb, gap=round(diff, 6))
                continue
            if _near_tie(a, b, i, r) and i >= r["min_divergence_position"]:
                verdict["tolerated"].append({"prompt": pid, "position": i})
                if len(verdict["tolerated"]) > r["max_near_tie_divergences"]:
                    return fail(prompt=pid, position=i, reason=f"more than {r['max_near_tie_divergences']} "
                                "prompts diverge after near-ties", host_token=ta, reference_token=tb,
                                host_logprob=la, reference_logprob=lb, gap=_gap(b, a, i))
                break
            why = "different token at a near-tie, too early" if _near_tie(a, b, i, r) else "different token"
            return fail(prompt=pid, position=i, reason=why, host_token=ta, reference_token=tb,
                        host_logprob=la, reference_logprob=lb, gap=_gap(b, a, i))
    return verdict


def describe(verdict, against):
    """One sentence for a verdict (against: what the host was compared with)."""
    if verdict["ok"]:
        extra = (f", {len(verdict['tolerated'])} divergence(s) after a near-tie"
                 if verdict["tolerated"] else "")
        return (f"same tokens as {against} on {verdict['compared']} prompts (largest log-probability "
                f"difference {verdict['max_logprob_diff']:.4f}{extra})")
    f = verdict["failure"]
    if f["position"] is None:
        return f"cannot be compared with {against}: {f['reason']}"
    gap = f" (gap {f['gap']:.4f} nats)" if isinstance(f.get("gap"), float) else ""
    if f["host_token"] is None:
        return f"differs from {against} on prompt {f['prompt']}: {f['reason']}"
    return (f"differs from {against} on prompt {f['prompt']} at token {f['position']}: {f['reason']}; "
            f"this host {f['host_token']} (logprob {f['host_logprob']}), {against} {f['reference_token']} "
            f"(logprob {f['reference_logprob']}){gap}")


def majority(fingerprints, rule=None):
    """The host whose fingerprint agrees with the most others (ties: the first by name), or None.

    Used as the reference when the stack file holds none; with fewer than three hosts no
    majority exists.
    """
    names = sorted(h for h, fp in fingerprints.items() if fp)
    if len(names) < 3:
        return None
    best, best_n = None, -1
    for h in names:
        n = sum(1 for o in names if o != h and compare(fingerprints[o], fingerprints[h], rule)["ok"])
        if n > best_n:
            best, best_n = h, n
    return best if best_n * 2 >= len(names) - 1 else None


def stack_digest(stack):
    """A short, order-independent digest of the stack a fingerprint was taken on."""
    return hashlib.sha256(json.dumps(stack, sort_keys=True, default=str).encode()).hexdigest()[:16]


def stack_changes(recorded, current):
    """Names of the stack entries that differ between a reference's record and the stack file."""
    recorded, current = recorded or {}, current or {}
    return sorted(k for k in set(recorded) | set(current) if recorded.get(k) != current.get(k))


def judge(host_fp, reference=None, fleet=None, rule=None, current_stack=None, stale_ok=False):
    """The check of one host: against the reference when there is one, else against the fleet's majority.

    reference: {"stack": {...}, "fingerprint": {...}} as the record playbook writes it, or None.
    fleet: {host: fingerprint} of every host probed in this run (for the majority).
    stale_ok: compare with a reference recorded on another stack instead of failing it (a re-pin's canary
    against the reference of the stack it leaves).
    Returns {ok, against, message, verdict, stale_reference: [changed stack entries]}.
    """
    if not host_fp:
        return {"ok": False, "against": None, "message": "no fingerprint: the server did not answer the probe",
                "verdict": None, "stale_reference": []}
    if reference and reference.get("fingerprint"):
        stale = stack_changes(reference.get("stack"), current_stack) if current_stack is not None else []
        verdict = compare(host_fp, reference["fingerprint"], rule)
        msg = describe(verdict, "the reference")
        if stale and stale_ok:
            return {"ok": verdict["ok"], "against": "reference", "verdict": verdict, "stale_reference": stale,
                    "message": f"{msg} (the reference was recorded before {', '.join(stale)} changed)"}
        if stale:
            return {"ok": False, "against": "reference", "verdict": verdict, "stale_reference": stale,
                    "message": (f"the reference was recorded on another stack ({', '.join(stale)} changed): "
                                f"re-record it (playbooks/fingerprint.yml) from a host you trust; {msg}")}
        return {"ok": verdict["ok"], "against": "reference", "message": msg, "verdict": verdict,
                "stale_reference": []}
    probed = sorted(h for h, fp in (fleet or {}).items() if fp)
    if len(probed) < 3:
        # nothing to compare with: recorded in the report, judged once a reference or a fleet exists
        return {"ok": True, "against": None, "verdict": None, "stale_reference": [],
                "message": (f"recorded, not compared: no reference fingerprint in the stack file and {len(probed)} "
                            "host(s) probed (a majority needs three); record a reference with "
                            "playbooks/fingerprint.yml")}
    ref_host = majority(fleet, rule)
    if ref_host is None:
        return {"ok": False, "against": None, "verdict": None, "stale_reference": [],
                "message": (f"no reference fingerprint in the stack file, and no majority of the {len(probed)} hosts "
                            "agrees: the hosts compute different answers. Record a reference from a host you "
                            "trust (playbooks/fingerprint.yml)")}
    verdict = compare(host_fp, fleet[ref_host], rule)
    return {"ok": verdict["ok"], "against": f"majority ({ref_host})", "verdict": verdict, "stale_reference": [],
            "message": describe(verdict, f"the fleet's majority ({ref_host})")}
