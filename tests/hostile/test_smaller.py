"""Issue 41, root 7: the smaller cases, each its one line (or its bound)."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from conftest import one_line, tree_hashes


@pytest.mark.parametrize("version", [0, 99, "1", -1, 10**30, []])
def test_resume_checks_the_runs_config_before_anything_is_written(version, run_copy, in_process):
    config = json.loads((run_copy / "config.json").read_text())
    config["format_version"] = version
    (run_copy / "config.json").write_text(json.dumps(config))
    before = tree_hashes(run_copy)
    code, _, err = in_process("train", "--out", run_copy, "--resume", "--steps", "6", "--quiet")
    assert code == 2 and "config.json: format_version" in one_line(err)
    assert tree_hashes(run_copy) == before


@pytest.mark.parametrize("value, field", [("abc", "d_model"), ("true", "d_model"), ("x", "dropout"),
                                          ("12.5", "n_heads"), ("3", "positional")])
def test_a_set_value_of_the_wrong_kind_names_its_field(value, field, in_process):
    code, _, err = in_process("train", "--out", "run", "--steps", "1", "--set", f"{field}={value}")
    assert code == 2 and f"--set {field}={value}: {field} takes" in one_line(err)


def test_ctranslate2_threads_beyond_the_cores_are_one_line(spm_run, in_process):
    code, _, err = in_process("translate", "I love you", "--engine", "ctranslate2", "--threads", "1024",
                              "--checkpoint", spm_run)
    assert code == 2 and f"this machine has {os.cpu_count()} cores" in one_line(err)


def test_a_client_hanging_up_mid_body_leaves_no_traceback(toy_run, capfd):
    from clearformer.serve.app import create_app
    from clearformer.serve.explainer import load

    app = create_app(load(toy_run))
    sent = []

    async def receive():
        if not sent:
            sent.append(1)
            return {"type": "http.request", "body": b'{"sentence": "I lo', "more_body": True}
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/api/explain", "raw_path": b"/api/explain", "query_string": b"", "root_path": "",
             "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
                         (b"content-length", b"100")], "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000)}
    asyncio.run(app(scope, receive, send))
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ClientDisconnect" not in err, err
    statuses = [m["status"] for m in sent[1:] if isinstance(m, dict) and m.get("type") == "http.response.start"]
    assert statuses == [400]


def test_claims_out_in_a_read_only_place_is_one_line(in_process, tmp_path):
    place = "/sys/clearformer-claims" if os.geteuid() == 0 else None
    if place is None:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        place = str(folder)
    code, _, err = in_process("claims", "3", "--quick", "--out", place)
    assert code == 2 and "--out" in one_line(err)




def test_mfu_is_never_shown_over_100_percent(tmp_path, monkeypatch, in_process):
    """A stored peak measured on a busy machine (here: absurdly low) is measured again when the run beats it,
    and the figure printed is a share of the new peak, never over 100%."""
    import re

    import torch

    from clearformer.train import mfu

    cache = tmp_path / "cache"
    cache.mkdir()
    threads = torch.get_num_threads()
    keys = []
    for count in range(1, 17):  # whatever thread count the run sets: the key names it (train/mfu.py)
        torch.set_num_threads(count)
        keys.append(mfu.machine_key(torch.device("cpu")))
    torch.set_num_threads(threads)
    (cache / "matmul_peak.json").write_text(json.dumps(dict.fromkeys(keys, 1000.0)))  # any run beats 1 kFLOP/s
    monkeypatch.setenv("CLEARFORMER_CACHE", str(cache))
    code, out, err = in_process("train", "--out", "run", "--steps", "2", "--eval-every", "2",
                                "--bleu-sentences", "2")
    assert code == 0, err
    shares = [float(x) for x in re.findall(r"MFU ([0-9.]+)%", out + err)]
    assert shares and all(0 <= share <= 100 for share in shares), out
    stored = json.loads((cache / "matmul_peak.json").read_text())
    assert any(stored[key] > 1000.0 for key in keys)  # measured again when beaten, and the stored value raised


def test_a_share_over_the_peak_after_measuring_again_is_not_a_result(monkeypatch):
    from clearformer.train import mfu

    measured = []
    monkeypatch.setattr(mfu, "matmul_peak", lambda *args, **kwargs: measured.append(1) or 2e9)
    peak = mfu.MeasuredPeak("cpu", value=1e9)
    assert peak.share(0.5e9) == 0.5 and not measured
    assert peak.share(1.5e9) == 0.75 and measured == [1]  # beaten: measured again, once
    assert peak.share(3e9) is None and peak.text(3e9) == "n/a" and measured == [1]
