#!/usr/bin/env python3
"""tandem-serve end to end, through curl, on a free loopback port with a fresh state directory.

  serve_test.py api|restart|gpt|failures|install|dashboard|schemathesis --serve TANDEM_SERVE --work DIR
                [--schemathesis EXE]

api: jobs of 2 and 1 ranks to done in FIFO order over 2 slots (metrics, log, result), cancel of a
queued and of a running job (its session gone, the checkpoint of `save` written), every refused
request (400/401/404/405/409/413 with a JSON message naming the field), /gpus, /metrics parsed by
prometheus_client. restart: a job running across a server restart is taken back and reaches done;
one killed while the server was down is lost with its last metrics. gpt: a GPT job to done (step
records with its progress, validation losses, the sample in its log) and a cancelled one that stops
at a step boundary with its checkpoint. failures: jobs failing for a bad flag, at run time and by a
killed rank each say why in `errors` (tandem-train's own lines, by rank). files: a 2-rank job trains
an ONNX model of --models-dir on an .npz of --data-dir to done (and writes it back with save_onnx);
names out of the folders (.., absolute, symlinks out, missing, a folder) are refused at submission
(400 naming the field), a file replaced by a symlink out while its job waited is refused at launch,
and a server without the folders refuses files but runs the built-in models. install: tandem-serve
copied into PREFIX/bin runs the tandem-train beside it. dashboard: the page in headless Chromium
after its first fetches: the job rows, the loss chart's SVG, a failed job's errors, a screenshot. schemathesis: the API
fuzzed against /openapi.json (jobs launched through a stand-in mpirun, /bin/true).
"""
import argparse
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_lib import Server, session_pids  # noqa: E402

SMALL = {"model": "mlp", "max_steps": 20, "no_eval": True, "batch_size": 32, "threads": 1}
GPT = {"model": "gpt", "n_layer": 1, "n_head": 2, "n_embd": 32, "context": 16, "batch_size": 4, "eval_windows": 4,
       "threads": 1}


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def expect_error(srv, method, path, body, status, needle, field=None, token=None, headers=()):
    got, text, hdrs = srv.curl(method, path, body, token, headers)
    check(got == status, "%s %s: %d, expected %d: %s" % (method, path, got, status, text))
    err = json.loads(text)
    check(needle in err["error"], "%s %s: error %r lacks %r" % (method, path, err["error"], needle))
    if field is not None:
        check(err.get("field") == field, "%s %s: field %r, expected %r" % (method, path, err.get("field"), field))
    return hdrs


def raw_exchange(port, request):
    """What the server sends back to `request` (bytes, sent as they are) until it closes the
    connection, or 10 s pass."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        reply = b""
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                reply += chunk
        except socket.timeout:
            pass
        return reply


def test_api(args):
    srv = Server(args.serve, os.path.join(args.work, "state"), "--slots", "2", "--max-body-bytes", "4096",
                 "--cancel-grace", "20").start()
    try:
        check(srv.json("GET", "/health", token="")["status"] == "ok", "health")
        # Refused requests: a message, and the field where one is to blame.
        expect_error(srv, "POST", "/jobs", SMALL, 401, "Authorization: Bearer", token="")
        expect_error(srv, "POST", "/jobs", SMALL, 401, "wrong bearer token", token="not-the-token")
        expect_error(srv, "DELETE", "/jobs/1", None, 401, "Bearer", token="")
        expect_error(srv, "POST", "/jobs", '{"model": "mlp",', 400, "not valid JSON")
        expect_error(srv, "POST", "/jobs", {"model": "mlp", "max_stepz": 5}, 400, "unknown field", "max_stepz")
        expect_error(srv, "POST", "/jobs", {"max_steps": "20"}, 400, "must be an integer", "max_steps")
        expect_error(srv, "POST", "/jobs", {"no_eval": 1}, 400, "must be a boolean", "no_eval")
        expect_error(srv, "POST", "/jobs", {"model": "resnet"}, 400, "one of", "model")
        expect_error(srv, "POST", "/jobs", {"ranks": 3}, 400, "slots", "ranks")
        expect_error(srv, "POST", "/jobs", {"save": "../../etc"}, 400, "does not match", "save")
        for taken in ("exit.json", "log.txt/ckpt", "job.json.tmp.12.0"):  # the job's own files
            expect_error(srv, "POST", "/jobs", {"save": taken}, 400, "the job's own", "save")
        expect_error(srv, "POST", "/jobs", {"model": "mlp; rm -rf /"}, 400, "one of", "model")
        expect_error(srv, "POST", "/jobs", [1, 2], 400, "JSON object")
        expect_error(srv, "POST", "/jobs", json.dumps({"model": "mlp", "pad": "x" * 8000}), 413, "larger than 4096")
        # Bodies httplib would read without the limit: chunked (411) and compressed (415).
        status, text, _ = srv.curl("POST", "/jobs", SMALL, headers=("Transfer-Encoding: chunked",))
        check(status == 411 and "Content-Length" in json.loads(text)["error"], "chunked: %d %s" % (status, text))
        status, text, _ = srv.curl("POST", "/jobs", SMALL, headers=("Content-Encoding: gzip",))
        check(status == 415 and "gzip" in json.loads(text)["error"], "gzip: %d %s" % (status, text))
        # A refusal made before the body is read closes the connection: the unread body, here
        # requests of their own (more than the server reads ahead), is not taken for next requests.
        body = b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n" * 400
        replies = raw_exchange(srv.port, b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                               % (len(body), body))
        check(replies.count(b"HTTP/1.1 ") == 1 and replies.startswith(b"HTTP/1.1 401"),
              "after a refused body: %r" % replies[:600])
        hdrs = expect_error(srv, "PUT", "/jobs", SMALL, 405, "not allowed")
        check("POST" in hdrs.get("allow", ""), "405 without Allow: %s" % hdrs)
        expect_error(srv, "GET", "/jobs/999", None, 404, "no job 999")
        expect_error(srv, "GET", "/nowhere", None, 404, "no such path")
        check(srv.json("GET", "/jobs") == [], "no jobs yet")
        # Reads need no token by a loopback name only: a page of another site whose name resolves
        # to 127.0.0.1 (DNS rebinding) reads nothing; the static page itself is served to it.
        for host in ("localhost:%d" % srv.port, "127.0.0.1", "[::1]:%d" % srv.port):
            status, text, _ = srv.curl("GET", "/jobs", token="", headers=("Host: " + host,))
            check(status == 200, "GET /jobs by %s: %d %s" % (host, status, text))
        for host in ("evil.example:%d" % srv.port, "127.evil.example", "localhost.evil.example", "[::2]", ""):
            hdrs = expect_error(srv, "GET", "/jobs", None, 401, "Bearer", token="", headers=("Host: " + host,))
            check("bearer" in hdrs.get("www-authenticate", "").lower(), "401 without WWW-Authenticate: %s" % hdrs)
        status, _, _ = srv.curl("GET", "/jobs", headers=("Host: evil.example",))
        check(status == 200, "GET /jobs by another name with the token: %d" % status)
        status, _, _ = srv.curl("GET", "/", token="", headers=("Host: evil.example",))
        check(status == 200, "the page by another name: %d" % status)
        # A second server on the same port is refused (no SO_REUSEPORT sharing of the connections).
        r = subprocess.run([args.serve, "--port", str(srv.port), "--state-dir", os.path.join(args.work, "other")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        check(r.returncode != 0 and b"cannot bind" in r.stdout, "second server: %d %s" % (r.returncode, r.stdout))
        # A non-loopback address without a token file is refused.
        r = subprocess.run([args.serve, "--bind", "0.0.0.0", "--port", "0", "--state-dir", os.path.join(args.work, "other")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        check(r.returncode != 0 and b"--token-file" in r.stdout, "open bind: %d %s" % (r.returncode, r.stdout))
        empty = os.path.join(args.work, "empty-token")
        open(empty, "w").close()
        r = subprocess.run([args.serve, "--token-file", empty, "--port", "0", "--state-dir", os.path.join(args.work, "other")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        check(r.returncode != 0 and b"is empty" in r.stdout, "empty token file: %d %s" % (r.returncode, r.stdout))

        # Two jobs over 2 slots: the 1-rank job waits for the 2-rank one (FIFO); the first at ZeRO stage 1.
        a = srv.submit(dict(SMALL, ranks=2, zero=1))
        b = srv.submit(dict(SMALL, ranks=1, metrics_every=2))
        ja = srv.wait(a, ["done"])
        jb = srv.wait(b, ["done"])
        for j, ranks in ((ja, 2), (jb, 1)):
            check(j["exit_code"] == 0 and j["progress"] == 1.0, "job %s: %s" % (j["id"], j))
            check(j["result"]["world_size"] == ranks and j["result"]["steps"] == 20, "result %s" % j["result"])
            check(j["argv"][:3] == [j["argv"][0], "-np", str(ranks)] and "--max-steps=20" in j["argv"], j["argv"])
        check("--zero=1" in ja["argv"] and ja["result"]["zero_stage"] == 1, "zero: %s %s" % (ja["argv"], ja["result"]))
        check(jb["started_at"] >= ja["finished_at"], "job 2 started before job 1 freed its slots")
        status, text, hdrs = srv.curl("GET", "/jobs/%s/metrics" % b)
        check(status == 200 and "ndjson" in hdrs["content-type"], "metrics: %d %s" % (status, hdrs))
        records = [json.loads(l) for l in text.splitlines()]
        steps = [r["step"] for r in records if r["event"] == "step"]
        check(steps == list(range(2, 21, 2)), "step records %s" % steps)
        check(records[-1]["event"] == "done", "last record %s" % records[-1])
        status, log, _ = srv.curl("GET", "/jobs/%s/log" % a)
        check(status == 200 and "done: 1 epochs, 20 steps" in log and "world size 2" in log, "log:\n" + log)
        check([j["id"] for j in srv.json("GET", "/jobs")] == [a, b], "list")

        # Cancel: a queued job at once; a running job with `save` stops at a step boundary,
        # checkpoints, and leaves no process of its session behind.
        c = srv.submit(dict(SMALL, ranks=2, max_steps=10 ** 6, save="ckpt"))
        d = srv.submit(dict(SMALL, ranks=2))
        jc = srv.wait(c, ["running"], pred=lambda j: j["progress"] > 0)
        jd = srv.json("GET", "/jobs/" + d)
        check(jd["state"] == "queued", "job 4 should wait for job 3's slots")
        check(jd["progress"] == 0 and jd["errors"] == [], "a queued job: progress 0, no errors: %s" % jd)
        check(srv.json("DELETE", "/jobs/" + d, expect=202)["state"] == "cancelled", "queued cancel")
        expect_error(srv, "DELETE", "/jobs/" + d, None, 409, "already cancelled")
        check(len(session_pids(jc["pid"])) >= 3, "job 3's session: %s" % session_pids(jc["pid"]))
        srv.json("DELETE", "/jobs/" + c, expect=202)
        jc = srv.wait(c, ["cancelled"], timeout=60)
        check(session_pids(jc["pid"]) == [], "processes of job 3 left: %s" % session_pids(jc["pid"]))
        check(jc["exit_code"] == 0 and jc["result"] and jc["result"].get("stopped") is True,
              "job 3 did not stop at a step boundary: %s" % jc)
        # Its progress is the steps it made over the steps it planned, not 1 for having ended.
        status, text, _ = srv.curl("GET", "/jobs/%s/metrics" % c)
        planned = [json.loads(l) for l in text.splitlines() if '"step"' in l][-1]["total_steps"]
        check(abs(jc["progress"] - jc["result"]["steps"] / planned) < 1e-12 and jc["progress"] < 0.5,
              "cancelled job 3: progress %s after %d of %d steps" % (jc["progress"], jc["result"]["steps"], planned))
        ckpts = glob.glob(os.path.join(srv.state_dir, "jobs", c, "ckpt", "ckpt-*"))
        check(ckpts, "no checkpoint written on cancel")
        check(srv.json("GET", "/jobs/" + c)["state"] == "cancelled", "state kept")

        # GPUs: a list (empty without NVML or GPUs), each one by its index.
        gpus = srv.json("GET", "/gpus")
        check(isinstance(gpus, list), "gpus %r" % gpus)
        for g in gpus:
            check(srv.json("GET", "/gpus/%d" % g["index"])["uuid"] == g["uuid"], "gpu %s" % g)
        expect_error(srv, "GET", "/gpus/999", None, 404, "no GPU")
        print("gpus:", json.dumps(gpus))

        # /metrics, read by Prometheus' own parser.
        from prometheus_client.parser import text_string_to_metric_families
        status, text, hdrs = srv.curl("GET", "/metrics")
        check(status == 200 and "version=0.0.4" in hdrs["content-type"], "metrics %d %s" % (status, hdrs))
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        jobs = {s.labels["state"]: s.value for s in fams["tandem_serve_jobs"].samples}
        check(jobs == {"queued": 0, "running": 0, "done": 2, "failed": 0, "cancelled": 2, "lost": 0}, "jobs %s" % jobs)
        sub = [s.value for s in fams["tandem_serve_jobs_submitted"].samples if s.name.endswith("_total")]
        check(sub == [4], "submitted %s" % sub)
        codes = {s.labels["code"]: s.value for s in fams["tandem_serve_http_responses"].samples
                 if s.name.endswith("_total")}
        check(codes.get("401", 0) >= 3 and codes.get("413", 0) >= 1, "responses %s" % codes)
        for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"):
            check(name in fams and fams[name].type == "gauge", "GPU family %s missing" % name)
        check(len(fams["DCGM_FI_DEV_GPU_UTIL"].samples) == len([g for g in gpus if g["utilization_gpu_percent"] is not None]),
              "GPU samples")
        doc = srv.json("GET", "/openapi.json")
        check(doc["openapi"].startswith("3.") and "/jobs/{id}" in doc["paths"], "openapi")
        # JobRequest.model's choices are the model registry's (resmlp: a model added by its file alone).
        models = doc["components"]["schemas"]["JobRequest"]["properties"]["model"]["anyOf"][0]["enum"]
        check({"mlp", "cnn", "gpt", "resmlp"} <= set(models), "model enum %s" % models)
        srv.json("POST", "/jobs", {"ranks": 1, "model": "resmlpx"}, expect=400)
        check(srv.stop() == 0, "tandem-serve exited non-zero (a sanitizer report?):\n" + srv.output()[-3000:])
    finally:
        srv.stop()
    print("serve api: ok")


def test_restart(args):
    srv = Server(args.serve, os.path.join(args.work, "state"), "--slots", "4")
    srv.start()
    try:
        r = srv.submit(dict(SMALL, ranks=2, max_steps=600))
        jr = srv.wait(r, ["running"], pred=lambda j: j["progress"] > 0)
        check(jr["progress"] < 0.5, "job 1 too fast to test a restart: %s" % jr["progress"])
        check(srv.stop() == 0, "server exit")
        check(session_pids(jr["pid"]), "job 1 died with the server")
        # The token is kept across the restart, and made private again if it was opened up meanwhile.
        token_file, token = os.path.join(srv.state_dir, "token"), srv.token
        os.chmod(token_file, 0o644)
        srv.start()
        check(srv.token == token and os.stat(token_file).st_mode & 0o777 == 0o600,
              "token after restart: mode %o" % (os.stat(token_file).st_mode & 0o777))
        # Taken back; on a fast machine it may have ended in the moment the server was down, and
        # then its exit record says how.
        check("job 1 (pid %d) still runs: taken back" % jr["pid"] in srv.output()
              or "job 1 ended while the server was down: done" in srv.output(), srv.output())
        check(srv.json("GET", "/jobs/" + r)["state"] in ("running", "done"), "job 1 after restart")
        jr = srv.wait(r, ["done"])
        check(jr["exit_code"] == 0 and jr["result"]["steps"] == 600, "job 1: %s" % jr)

        l = srv.submit(dict(SMALL, ranks=1, max_steps=10 ** 6))
        jl = srv.wait(l, ["running"], pred=lambda j: j["progress"] > 0)
        srv.stop()
        for _ in range(50):  # the whole session, supervisor included, while nobody watches
            pids = session_pids(jl["pid"])
            if not pids:
                break
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        check(not session_pids(jl["pid"]), "could not kill job 2")
        srv.start()
        jl = srv.json("GET", "/jobs/" + l)
        check(jl["state"] == "lost" and jl["exit_code"] is None, "job 2: %s" % jl)
        check(jl["last_metrics"] and jl["last_metrics"]["event"] == "step", "job 2 lost its metrics: %s" % jl)
        check(srv.json("GET", "/jobs/" + r)["state"] == "done", "job 1 after the second restart")
        check(srv.stop() == 0, "tandem-serve exited non-zero (a sanitizer report?):\n" + srv.output()[-3000:])
    finally:
        srv.stop()
    print("serve restart: ok")


def test_gpt(args):
    srv = Server(args.serve, os.path.join(args.work, "state"), "--slots", "2", "--cancel-grace", "20").start()
    try:
        expect_error(srv, "POST", "/jobs", dict(GPT, prompt="a\u0000b"), 400, "does not match", "prompt")
        expect_error(srv, "POST", "/jobs", dict(GPT, text_dir="/etc"), 400, "unknown field", "text_dir")
        expect_error(srv, "POST", "/jobs", dict(GPT, n_head=0), 400, ">= 1", "n_head")
        g = srv.submit(dict(GPT, ranks=2, max_steps=12, eval_every=6, metrics_every=3, sample_tokens=24,
                            prompt="--lr=5 \"quoted\" ; $(no shell)"))
        jg = srv.wait(g, ["done"])
        check(jg["exit_code"] == 0 and jg["progress"] == 1.0, "gpt job: %s" % jg)
        res = jg["result"]
        check(res["model"] == "gpt" and res["steps"] == 12 and res["world_size"] == 2, "result %s" % res)
        check(res["loss_unit"] == "nats/byte" and 0 < res["val_loss"] < 6, "result %s" % res)
        status, text, _ = srv.curl("GET", "/jobs/%s/metrics" % g)
        records = [json.loads(l) for l in text.splitlines()]
        steps = [(r["step"], r["total_steps"]) for r in records if r["event"] == "step"]
        check(steps == [(3, 12), (6, 12), (9, 12), (12, 12)], "step records %s" % steps)
        evals = [r["step"] for r in records if r["event"] == "eval" and r["loss_unit"] == "nats/byte"]
        check(evals == [6, 12], "eval records %s" % evals)
        status, log, _ = srv.curl("GET", "/jobs/%s/log" % g)
        # The prompt reached tandem-train as one argument, untouched, and the sample continues it.
        check("sample (temperature" in log and '--lr=5 "quoted" ; $(no shell)' in log, "log:\n" + log)

        # Cancel: SIGTERM stops the GPT at a step boundary and --save writes its checkpoint.
        c = srv.submit(dict(GPT, ranks=2, max_steps=10 ** 6, save="ckpt"))
        jc = srv.wait(c, ["running"], pred=lambda j: j["progress"] > 0)
        srv.json("DELETE", "/jobs/" + c, expect=202)
        jc = srv.wait(c, ["cancelled"], timeout=60)
        check(session_pids(jc["pid"]) == [], "processes of the gpt job left: %s" % session_pids(jc["pid"]))
        check(jc["exit_code"] == 0 and jc["result"] and jc["result"].get("stopped") is True,
              "the gpt job did not stop at a step boundary: %s" % jc)
        check(glob.glob(os.path.join(srv.state_dir, "jobs", c, "ckpt", "ckpt-*")), "no checkpoint written on cancel")
        check(srv.stop() == 0, "tandem-serve exited non-zero (a sanitizer report?):\n" + srv.output()[-3000:])
    finally:
        srv.stop()
    print("serve gpt: ok")


def rank_pid(sid, rank):
    """The pid of MPI rank `rank` among the processes of session `sid` (its OMPI_COMM_WORLD_RANK)."""
    for p in session_pids(sid):
        try:
            env = open("/proc/%d/environ" % p, "rb").read().split(b"\0")
        except OSError:
            continue
        if b"OMPI_COMM_WORLD_RANK=%d" % rank in env:
            return p
    return None


def test_failures(args):
    srv = Server(args.serve, os.path.join(args.work, "state"), "--slots", "2").start()
    try:
        # A bad combination of flags: tandem-train refuses it on every rank, exit code 2.
        f = srv.submit(dict(SMALL, ranks=2, mode="dp"))
        # A run-time error: --resume of a folder that does not exist.
        r = srv.submit(dict(SMALL, ranks=2, resume="99/ckpt"))
        # A rank killed: mpirun's notice names it.
        k = srv.submit(dict(SMALL, ranks=2, max_steps=10 ** 6))
        jf = srv.wait(f, ["failed"])
        print("bad flag:", json.dumps(jf["errors"]))
        check(jf["exit_code"] == 2, "bad flag: exit code %s" % jf["exit_code"])
        check(len(jf["errors"]) == 1 and jf["errors"][0].startswith("ranks 0, 1: tandem-train: ")
              and "--mode dp: needs --devices" in jf["errors"][0], "bad flag: errors %s" % jf["errors"])
        check(jf["progress"] == 0, "bad flag: progress %s" % jf["progress"])
        jr = srv.wait(r, ["failed"])
        print("resume:", json.dumps(jr["errors"]))
        check(jr["errors"] and jr["errors"][0].startswith("rank 0: tandem-train: error: ")
              and "99/ckpt" in jr["errors"][0] and "not a checkpoint" in jr["errors"][0], "resume: errors %s" % jr["errors"])
        for j in (jf, jr):
            check(not any("mpirun" in e or "MPI_ABORT" in e or "----" in e for e in j["errors"]),
                  "Open MPI's boilerplate in errors: %s" % j["errors"])
        jk = srv.wait(k, ["running"], pred=lambda j: j["progress"] > 0)
        victim = rank_pid(jk["pid"], 1)
        check(victim, "no rank 1 in the session of job %s" % k)
        os.kill(victim, signal.SIGKILL)
        jk = srv.wait(k, ["failed"], timeout=60)
        print("killed:", json.dumps(jk["errors"]))
        check(jk["errors"] and jk["errors"][0] == "rank 1 was killed by signal 9 (Killed)",
              "killed rank: errors %s" % jk["errors"])
        check(0 < jk["progress"] < 1, "killed rank: progress %s" % jk["progress"])
        check(srv.stop() == 0, "tandem-serve exited non-zero (a sanitizer report?):\n" + srv.output()[-3000:])
    finally:
        srv.stop()
    print("serve failures: ok")


def without(request, *fields):
    return {k: v for k, v in request.items() if k not in fields}


def refused_files(srv, request, field, needle, work):
    """POST /jobs of `request` is a 400 naming `field` with `needle` in its message, and no job is
    made; the message quotes what the client sent, never the server's folders."""
    jobs = len(srv.json("GET", "/jobs"))
    status, text, _ = srv.curl("POST", "/jobs", request)
    check(status == 400, "%s: %d, expected 400: %s" % (request, status, text))
    err = json.loads(text)
    check(err.get("field") == field and needle in err["error"],
          "%s: error %r (field %r), expected %r (field %r)" % (request, err["error"], err.get("field"), needle, field))
    if work not in json.dumps(request):
        check(work not in err["error"], "the server's path in %r" % err["error"])
    check(len(srv.json("GET", "/jobs")) == jobs, "a refused request made a job")
    return err["error"]


def test_files(args):
    # The folders of a server: models/ and data/, a file outside them, and symlinks out of them
    # (one into a folder whose name starts with "models": a string-prefix check would take it).
    here = os.path.dirname(os.path.abspath(__file__))
    work = os.path.realpath(args.work)
    models, data = os.path.join(work, "models"), os.path.join(work, "data")
    os.makedirs(os.path.join(data, "sets"))
    os.makedirs(os.path.join(work, "models-evil"))
    os.makedirs(models)
    mlp_onnx = os.path.join(here, "..", "onnx", "models", "mlp.onnx")  # an MLP of 6 inputs, 4 outputs
    shutil.copy(mlp_onnx, os.path.join(models, "mlp.onnx"))
    shutil.copy(mlp_onnx, os.path.join(models, "swap.onnx"))
    shutil.copy(mlp_onnx, os.path.join(work, "secret.onnx"))
    shutil.copy(mlp_onnx, os.path.join(work, "models-evil", "x.onnx"))
    regression = os.path.join(here, "..", "data", "arrays", "regression.npz")  # x [256, 6], y [256, 4]
    shutil.copy(regression, os.path.join(data, "sets", "train.npz"))
    shutil.copy(regression, os.path.join(work, "secret.npz"))
    os.symlink("../secret.onnx", os.path.join(models, "escape.onnx"))
    os.symlink("../models-evil/x.onnx", os.path.join(models, "evil.onnx"))
    os.symlink("../secret.npz", os.path.join(data, "escape.npz"))
    os.makedirs(os.path.join(models, "folder.onnx"))

    r = subprocess.run([args.serve, "--port", "0", "--state-dir", os.path.join(work, "other"), "--models-dir",
                        os.path.join(work, "no-such")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    check(r.returncode != 0 and b"--models-dir" in r.stdout, "missing --models-dir: %d %s" % (r.returncode, r.stdout))

    job = {"model": "mlp.onnx", "data": "sets/train.npz", "loss": "mse", "val_fraction": 0.25, "ranks": 2,
           "batch_size": 16, "epochs": 1, "threads": 1, "optimizer": "adam", "lr": 0.01, "save_onnx": "trained.onnx"}
    srv = Server(args.serve, os.path.join(work, "state"), "--slots", "2", "--models-dir", models,
                 "--data-dir", os.path.join(work, "data", "sets", "..")).start()
    try:
        check("model files from %s (--models-dir)" % models in srv.output(), srv.output())
        check("array files from %s (--data-dir)" % data in srv.output(), srv.output())
        # Refused at submission: 400 naming the field, no job made.
        refused_files(srv, dict(job, model="../secret.onnx"), "model", "'..'", work)
        refused_files(srv, dict(job, model=os.path.join(models, "mlp.onnx")), "model", "absolute path", work)
        refused_files(srv, dict(job, model="escape.onnx"), "model", "resolves outside the models folder", work)
        refused_files(srv, dict(job, model="evil.onnx"), "model", "resolves outside the models folder", work)
        refused_files(srv, dict(job, model="missing.onnx"), "model", "no file 'missing.onnx' in the models folder",
                      work)
        refused_files(srv, dict(job, model="folder.onnx"), "model", "is not a file", work)
        refused_files(srv, dict(job, model="mlp.onnx/x.onnx"), "model", "cannot be resolved", work)
        refused_files(srv, dict(job, data="../secret.npz"), "data", "'..'", work)
        refused_files(srv, dict(job, data="/etc/passwd"), "data", "absolute path", work)
        refused_files(srv, dict(job, data=""), "data", "empty file name", work)
        refused_files(srv, dict(job, data="train.npz"), "data", "no file 'train.npz' in the data folder", work)
        refused_files(srv, dict(without(job, "val_fraction"), val_data="escape.npz"), "val_data",
                      "resolves outside the data folder", work)
        refused_files(srv, dict(job, data="mlp.onnx"), "data", "no file 'mlp.onnx' in the data folder", work)
        # Fields beside the files.
        refused_files(srv, dict(job, save_onnx="../x.onnx"), "save_onnx", "does not match", work)
        refused_files(srv, dict(job, model="mlp"), "save_onnx", "needs 'model' to name a FILE.onnx", work)
        refused_files(srv, {"model": "mlp", "inputs": "x"}, "inputs", "needs 'data'", work)
        refused_files(srv, dict(job, val_data="sets/train.npz"), "val_fraction", "not both", work)
        refused_files(srv, dict(job, loss="hinge"), "loss", "one of", work)
        refused_files(srv, dict(job, model="a\u0000.onnx"), "model", "a FILE.onnx in the server's --models-dir", work)

        # A 2-rank job trains the ONNX model on the arrays, and writes it back into its own folder.
        a = srv.submit(job)
        # Queued behind it, a job whose model is replaced by a symlink out of the folder after its
        # submission: the launch resolves again and refuses it.
        b = srv.submit(dict(without(job, "save_onnx"), model="swap.onnx", ranks=1))
        check(srv.json("GET", "/jobs/" + b)["state"] == "queued", "job 2 should wait for job 1's slots")
        os.remove(os.path.join(models, "swap.onnx"))
        os.symlink("../secret.onnx", os.path.join(models, "swap.onnx"))
        ja = srv.wait(a, ["done"])
        check(ja["exit_code"] == 0 and ja["progress"] == 1.0, "job 1: %s" % ja)
        check(ja["result"]["world_size"] == 2 and ja["result"]["model"] == "onnx", "result %s" % ja["result"])
        check("--model=" + os.path.join(models, "mlp.onnx") in ja["argv"]
              and "--data=" + os.path.join(data, "sets", "train.npz") in ja["argv"], "argv %s" % ja["argv"])
        job_dir = os.path.join(srv.state_dir, "jobs", a)
        check("--save-onnx=" + os.path.join(os.path.realpath(srv.state_dir), "jobs", a, "trained.onnx") in ja["argv"],
              "argv %s" % ja["argv"])
        trained = open(os.path.join(job_dir, "trained.onnx"), "rb").read()
        check(trained and trained != open(mlp_onnx, "rb").read(), "trained.onnx not written, or not trained")
        status, log, _ = srv.curl("GET", "/jobs/%s/log" % a)
        check("validation loss" in log and "world size 2" in log, "log:\n" + log)
        jb = srv.wait(b, ["failed"])
        check(jb["pid"] is None and jb["argv"] == [] and "could not start" in jb["reason"]
              and "field 'model': 'swap.onnx' resolves outside the models folder" in jb["reason"], "job 2: %s" % jb)
        check(srv.stop() == 0, "tandem-serve exited non-zero (a sanitizer report?):\n" + srv.output()[-3000:])
    finally:
        srv.stop()

    # Without the folders: files are refused, the built-in models run as before.
    srv = Server(args.serve, os.path.join(work, "state-bare"), "--slots", "1", "--mpirun", "/bin/true").start()
    try:
        refused_files(srv, {"model": "mlp.onnx"}, "model", "started without --models-dir", work)
        refused_files(srv, {"model": "mlp", "data": "sets/train.npz"}, "data", "started without --data-dir", work)
        srv.wait(srv.submit({"model": "mlp"}), ["done"], timeout=60)
    finally:
        srv.stop()
    print("serve files: ok")


def test_install(args):
    # The layout of `cmake --install`: PREFIX/bin/tandem-serve and PREFIX/bin/tandem-train. A folder
    # PREFIX/tandem-train/tandem-train (PREFIX=$HOME with a checkout named tandem-train) must not be
    # taken for the build tree's.
    prefix = os.path.join(args.work, "prefix")
    os.makedirs(os.path.join(prefix, "bin"))
    os.makedirs(os.path.join(prefix, "tandem-train"))
    serve = os.path.join(prefix, "bin", "tandem-serve")
    shutil.copy2(args.serve, serve)
    for path, says in ((os.path.join(prefix, "bin", "tandem-train"), "installed"),
                       (os.path.join(prefix, "tandem-train", "tandem-train"), "decoy")):
        with open(path, "w") as f:
            f.write("#!/bin/sh\necho 'tandem-train stand-in: %s'\n" % says)
        os.chmod(path, 0o755)
    srv = Server(serve, os.path.join(args.work, "state"), "--slots", "1").start()
    try:
        installed = os.path.join(os.path.realpath(prefix), "bin", "tandem-train")
        check("tandem-train %s)" % installed in srv.output(), "installed tandem-serve did not pick %s:\n%s"
              % (installed, srv.output()))
        j = srv.submit({"model": "mlp"})
        srv.wait(j, ["done"], timeout=60)
        status, log, _ = srv.curl("GET", "/jobs/%s/log" % j)
        check("tandem-train stand-in: installed" in log, "the job ran another tandem-train:\n" + log)
        check(srv.stop() == 0, "tandem-serve exited non-zero:\n" + srv.output()[-3000:])
    finally:
        srv.stop()
    # The build tree: tandem-serve in apps/tandem-serve/ finds apps/tandem-train/tandem-train.
    srv = Server(args.serve, os.path.join(args.work, "state-build"), "--slots", "1").start()
    try:
        build_tree = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(args.serve))), "tandem-train",
                                  "tandem-train")
        check("tandem-train %s)" % build_tree in srv.output(), "build tree: %s" % srv.output())
    finally:
        srv.stop()
    os.remove(os.path.join(prefix, "bin", "tandem-train"))
    os.remove(os.path.join(prefix, "tandem-train", "tandem-train"))
    r = subprocess.run([serve, "--port", "0", "--state-dir", os.path.join(args.work, "state")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    check(r.returncode != 0 and b"give --tandem-train PATH" in r.stdout, "no tandem-train: %d %s" % (r.returncode, r.stdout))
    print("serve install: ok")


def test_dashboard(args):
    srv = Server(args.serve, os.path.join(args.work, "state"), "--slots", "2").start()
    try:
        f = srv.submit(dict(SMALL, ranks=1, mode="dp"))  # fails at once: tandem-train's flag error
        j = srv.submit(dict(SMALL, ranks=1, metrics_every=2, no_eval=False, eval_batch_size=1000))
        jf = srv.wait(f, ["failed"])
        srv.wait(j, ["done"])
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        check(chromium, "no chromium")
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}  # the ASan build's preload
        # A virtual-time budget under the 2 s poll period: what the page shows after its first
        # fetches (virtual time waits for them), not after a later poll.
        base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--user-data-dir=" + os.path.join(args.work, "chromium"), "--virtual-time-budget=500",
                "--window-size=1400,900"]

        def dump(url):
            return subprocess.run(base + ["--dump-dom", url], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  env=env, timeout=90).stdout.decode()

        dom = dump(srv.url("/"))  # the latest job selected: the done one
        check('data-rendered="1"' in dom, "the page did not finish its first round:\n" + dom[:3000])
        check('data-job-id="%s"' % j in dom and 'data-job-id="%s"' % f in dom, "no job rows in the DOM:\n" + dom[:3000])
        loss = dom.split('id="chart-loss"', 1)[-1].split("</svg>", 1)[0]
        check("<polyline" in loss and 'class="series"' in loss, "no loss curve in the DOM:\n" + loss[:2000])
        check('class="state state-done"' in dom and 'class="state state-failed"' in dom, "job states")
        check("no GPUs" in dom or 'class="gpu"' in dom, "GPU panel")
        # The failed job's reason under its row.
        row = dom.split('data-error-of="%s"' % f, 1)[-1].split("</tr>", 1)[0]
        check("--mode dp: needs --devices" in row, "no error under the failed job's row:\n" + dom[:4000])
        # Selected (#job=ID): its errors in the panel instead of three empty charts.
        dom = dump(srv.url("/#job=%s" % f))
        panel = dom.split('id="job-errors"', 1)[-1].split("</div>", 2)
        check(jf["errors"][0] in dom and "--mode dp: needs --devices" in "".join(panel[:2]),
              "no errors in the failed job's panel:\n" + dom[:4000])
        check('<div class="charts" hidden' in dom and "no data yet" not in dom.split('class="charts"', 1)[0],
              "the failed job's panel shows empty charts:\n" + dom[:4000])
        shot = os.path.join(args.work, "dashboard.png")
        if os.path.exists(shot):
            os.remove(shot)
        subprocess.run(base + ["--screenshot=" + shot, srv.url("/")], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=env, timeout=90)
        check(os.path.exists(shot) and open(shot, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "no screenshot")
        print("screenshot:", shot)
        check(srv.stop() == 0, "tandem-serve exited non-zero (a sanitizer report?):\n" + srv.output()[-3000:])
    finally:
        srv.stop()
    print("serve dashboard: ok")


def test_schemathesis(args):
    # Jobs start through a stand-in mpirun (/bin/true): the API and its queue are exercised, no
    # training runs.
    srv = Server(args.serve, os.path.join(args.work, "state"), "--slots", "1024", "--mpirun", "/bin/true").start()
    try:
        cmd = [args.schemathesis, "run", srv.url("/openapi.json"), "-H", "Authorization: Bearer " + srv.token,
               "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
               "response_schema_conformance",
               "--max-examples", "15", "--request-timeout", "10", "--generation-deterministic",
               "--phases", "examples,coverage,fuzzing", "--no-color"]
        # In the work folder: schemathesis keeps a .schemathesis/ cache in its working directory.
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=150, cwd=args.work,
                           env=dict(os.environ, SCHEMATHESIS_HOOKS=""))
        out = r.stdout.decode()
        print(out[-6000:])
        check(r.returncode == 0, "schemathesis found problems (exit %d)" % r.returncode)
        check(srv.json("GET", "/health")["status"] == "ok", "server alive after the fuzzing")
        check(srv.stop() == 0, "tandem-serve exited non-zero (a sanitizer report?):\n" + srv.output()[-3000:])
    finally:
        srv.stop()
    print("serve schemathesis: ok")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("test", choices=["api", "restart", "gpt", "failures", "files", "install", "dashboard",
                                    "schemathesis"])
    p.add_argument("--serve", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--schemathesis", default="schemathesis")
    args = p.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    {"api": test_api, "restart": test_restart, "gpt": test_gpt, "failures": test_failures, "files": test_files,
     "install": test_install, "dashboard": test_dashboard, "schemathesis": test_schemathesis}[args.test](args)


if __name__ == "__main__":
    main()
