"""The greedy fingerprint and its rule (issue 17): noise passes, garbage fails with where and how."""
import copy

import pytest

from ansible_collections.blackwell.serving.plugins.module_utils import fingerprint as fp


def _answer(tokens, logprobs, runners):
    """An answer shaped like sglang 0.5.9's /generate with return_logprob and top_logprobs_num=2."""
    chosen = [[lp, t, None] for t, lp in zip(tokens, logprobs)]
    tops = [[[lp, t, None], [rlp, rt, None]] for t, lp, (rt, rlp) in zip(tokens, logprobs, runners)]
    return {"text": "...", "meta_info": {"id": "x", "output_token_logprobs": chosen, "output_top_logprobs": tops}}


def _record(prompts=3, n=16, seed=0):
    out = []
    for p in range(prompts):
        tokens = [1000 + 37 * p + 11 * i + seed for i in range(n)]
        logprobs = [-0.05 - 0.01 * ((i + p) % 5) for i in range(n)]
        runners = [(t + 1, lp - 2.0) for t, lp in zip(tokens, logprobs)]
        out.append(fp.parse_generate(f"prompt {p}", _answer(tokens, logprobs, runners)))
    return {"format": fp.FORMAT, "prompts": out}


def test_parse_reads_tokens_logprobs_and_runner_up():
    rec = fp.parse_generate("hello", [_answer([5, 6], [-0.1, -0.2], [(7, -1.0), (8, -3.0)])])
    assert rec == {"id": fp.prompt_id("hello"), "tokens": [5, 6], "logprobs": [-0.1, -0.2],
                   "runner_up": [[7, -1.0], [8, -3.0]]}


@pytest.mark.parametrize("answer", [{}, {"meta_info": {}}, {"meta_info": {"output_token_logprobs": [["x"]]}}])
def test_parse_refuses_an_answer_without_logprobs(answer):
    with pytest.raises(fp.FingerprintError):
        fp.parse_generate("p", answer)


def test_request_is_greedy_fixed_length_with_seed():
    body = fp.generate_request("p", 32, 1234)
    assert body["sampling_params"] == {"temperature": 0.0, "max_new_tokens": 32, "ignore_eos": True,
                                       "sampling_seed": 1234}
    assert body["return_logprob"] is True and body["top_logprobs_num"] == 2


def test_identical_fingerprints_pass():
    a = _record()
    v = fp.compare(a, copy.deepcopy(a))
    assert v["ok"] and v["compared"] == 3 and v["max_logprob_diff"] == 0


def test_small_numeric_noise_passes():
    a, b = _record(), _record()
    for p in b["prompts"]:
        p["logprobs"] = [lp + 0.03 for lp in p["logprobs"]]
    v = fp.compare(b, a)
    assert v["ok"] and v["max_logprob_diff"] == pytest.approx(0.03)


def test_logprob_drift_beyond_tolerance_fails_with_position():
    a, b = _record(), _record()
    b["prompts"][1]["logprobs"][4] -= 0.5
    v = fp.compare(b, a)
    assert not v["ok"]
    f = v["failure"]
    assert (f["prompt"], f["position"], f["host_token"]) == (a["prompts"][1]["id"], 4, a["prompts"][1]["tokens"][4])
    assert "0.5000 apart" in f["reason"]


def test_garbage_from_position_three_fails_naming_tokens_and_gap():
    a, b = _record(), _record()
    p = b["prompts"][0]
    p["tokens"][3:] = [7 for _ in p["tokens"][3:]]
    v = fp.compare(b, a)
    assert not v["ok"]
    f = v["failure"]
    assert f["position"] == 3 and f["host_token"] == 7 and f["reference_token"] == a["prompts"][0]["tokens"][3]
    assert f["reason"] == "different token" and f["gap"] is None
    text = fp.describe(v, "the reference")
    assert "at token 3" in text and "this host 7" in text


def _flip_at(rec, prompt, pos, margin):
    """rec chose its runner-up at pos (a near-tie: the two within margin); later tokens differ too."""
    p = rec["prompts"][prompt]
    old, lp = p["tokens"][pos], p["logprobs"][pos]
    p["tokens"][pos] = old + 1
    p["runner_up"][pos] = [old, lp]
    p["logprobs"][pos] = lp + margin
    for i in range(pos + 1, len(p["tokens"])):
        p["tokens"][i] = 99999 + i


def test_a_late_divergence_after_a_near_tie_is_tolerated_once():
    a, b = _record(), _record()
    _flip_at(b, 2, 10, 0.01)
    v = fp.compare(b, a)
    assert v["ok"] and v["tolerated"] == [{"prompt": a["prompts"][2]["id"], "position": 10}]


def test_a_near_tie_divergence_too_early_fails():
    a, b = _record(), _record()
    _flip_at(b, 0, 2, 0.01)
    v = fp.compare(b, a)
    assert not v["ok"] and v["failure"]["reason"] == "different token at a near-tie, too early"


def test_two_near_tie_divergences_exceed_the_default_bound():
    a, b = _record(), _record()
    _flip_at(b, 0, 9, 0.01)
    _flip_at(b, 1, 12, 0.01)
    assert not fp.compare(b, a)["ok"]
    assert fp.compare(b, a, {"max_near_tie_divergences": 2})["ok"]


def test_a_confident_different_choice_is_not_a_near_tie():
    a, b = _record(), _record()
    _flip_at(b, 0, 10, 0.5)  # the host's choice beat the reference's token by 0.5 nats: not noise
    v = fp.compare(b, a)
    assert not v["ok"] and v["failure"]["reason"] == "different token"


def test_different_prompt_sets_cannot_be_compared():
    a, b = _record(prompts=3), _record(prompts=2)
    v = fp.compare(b, a)
    assert not v["ok"] and "different prompts" in fp.describe(v, "the reference")


def test_majority_names_the_odd_host_out():
    good = _record()
    bad = _record(seed=5)
    fleet = {"h1": good, "h2": copy.deepcopy(good), "h3": bad, "h4": copy.deepcopy(good)}
    assert fp.majority(fleet) == "h1"
    verdicts = {h: fp.judge(f, fleet=fleet) for h, f in fleet.items()}
    assert [h for h, v in verdicts.items() if not v["ok"]] == ["h3"]
    assert verdicts["h3"]["against"] == "majority (h1)"
    assert "at token 0" in verdicts["h3"]["message"]


def test_no_majority_fails_every_host():
    fleet = {"h1": _record(seed=1), "h2": _record(seed=2), "h3": _record(seed=3)}
    assert fp.majority(fleet) is None
    assert not any(fp.judge(f, fleet=fleet)["ok"] for f in fleet.values())


def test_one_host_without_reference_is_recorded_not_compared():
    v = fp.judge(_record(), fleet={"h1": _record()})
    assert v["ok"] and v["against"] is None and v["message"].startswith("recorded, not compared")


def test_reference_recorded_on_another_stack_must_be_re_recorded():
    ref = {"stack": {"sglang_commit": "a" * 40, "nvidia_driver_version": "580.95.05"}, "fingerprint": _record()}
    current = {"sglang_commit": "b" * 40, "nvidia_driver_version": "580.95.05"}
    v = fp.judge(_record(), reference=ref, current_stack=current)
    assert not v["ok"] and v["stale_reference"] == ["sglang_commit"]
    assert "re-record it" in v["message"]
    same = fp.judge(_record(), reference=ref, current_stack=dict(ref["stack"]))
    assert same["ok"] and same["against"] == "reference"


def test_a_host_that_did_not_answer_fails():
    assert not fp.judge(None, fleet={})["ok"]


def test_a_canary_may_be_compared_with_the_reference_of_the_stack_it_leaves():
    ref = {"stack": {"sglang_commit": "a" * 40}, "fingerprint": _record()}
    new_stack = {"sglang_commit": "b" * 40}
    same = fp.judge(_record(), reference=ref, current_stack=new_stack, stale_ok=True)
    assert same["ok"] and same["stale_reference"] == ["sglang_commit"]
    assert "recorded before sglang_commit changed" in same["message"]
    garbage = _record()
    garbage["prompts"][0]["tokens"][4:] = [3] * 12
    bad = fp.judge(garbage, reference=ref, current_stack=new_stack, stale_ok=True)
    assert not bad["ok"] and "at token 4" in bad["message"]


def test_take_sends_each_prompt_and_stops_at_the_first_without_an_answer():
    sent = []

    def post(body):
        sent.append(body)
        if len(sent) == 3:
            raise ConnectionRefusedError("refused")
        return _answer([5, 6], [-0.1, -0.2], [(7, -1.0), (8, -3.0)])

    ok = fp.take(post, "http://h:1/generate", ["a", "b"], 2, 1234)
    assert ok["requests"] == 2 and ok["fingerprint"]["settings"] == {"max_new_tokens": 2, "seed": 1234}
    assert [r["id"] for r in ok["fingerprint"]["prompts"]] == [fp.prompt_id("a"), fp.prompt_id("b")]
    assert sent[0] == fp.generate_request("a", 2, 1234)
    bad = fp.take(post, "http://h:1/generate", ["c"], 2, 1234)
    assert "fingerprint" not in bad and bad["requests"] == 1
    assert bad["msg"] == "http://h:1/generate: prompt 1 of 1 got no answer: refused"
    unreadable = fp.take(lambda body: {"text": "no logprobs"}, "u", ["a"], 2, 1234)
    assert unreadable["msg"].startswith("u: prompt 1: the answer has no meta_info")
