#!/usr/bin/env python3
"""tandem-serve --launcher slurm against a real Slurm (scripts/slurm-local's cluster; SLURM_CONF names it).

  serve_slurm_test.py --serve TANDEM_SERVE --work DIR

A 2-rank job with `save` is submitted over HTTP, followed to running (Slurm's RUNNING, step
records), cancelled with DELETE: SIGTERM reaches its ranks through scancel, it stops at a step
boundary, checkpoints and ends `cancelled`; its log is read over HTTP. A second job asks for more
CPUs than are free beside it: pending in Slurm, shown queued with Slurm's reason, cancelled while
pending. A third runs to done across a restart of the server. One whose batch step is killed
(no exit record, as where the state directory is not shared) fails saying so. A job Slurm refuses (more tasks than the cluster has) fails with
sbatch's message. The server refuses to start without --state-dir or with a bad partition.
Exits 77 (skipped) when no cluster answers.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
from serve_lib import Server  # noqa: E402

JOB = {"model": "mlp", "ranks": 2, "no_eval": True, "batch_size": 32, "threads": 1, "metrics_every": 5}


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def squeue_state(slurm_id):
    r = subprocess.run(["squeue", "-h", "-j", slurm_id, "-o", "%T"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=30)
    return r.stdout.decode().strip()


def refused_starts(args):
    base = [args.serve, "--launcher", "slurm", "--port", "0"]
    r = subprocess.run(base, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30, cwd=args.work)
    check(r.returncode != 0 and b"give --state-dir" in r.stdout and b"shared with the Slurm nodes" in r.stdout,
          "no --state-dir: %d %s" % (r.returncode, r.stdout))
    state = ["--state-dir", os.path.join(args.work, "refused")]
    for partition, needle in (("no-such-partition", b"Partition no-such-partition not found"),
                              ("debug;rm -rf /", b"expected partition names")):
        r = subprocess.run(base + state + ["--slurm-partition", partition], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30)
        check(r.returncode != 0 and needle in r.stdout, "partition %r: %d %s" % (partition, r.returncode, r.stdout))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--serve", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    if not os.path.isfile(os.environ.get("SLURM_CONF", "")) or \
            subprocess.run(["sinfo", "-h"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        print("SKIP: no Slurm test cluster answers (SLURM_CONF=%s; scripts/slurm-local start DIR)"
              % os.environ.get("SLURM_CONF"))
        sys.exit(77)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    refused_starts(args)

    srv = Server(args.serve, os.path.join(args.work, "state"), "--launcher", "slurm", "--slurm-partition", "debug",
                 "--slurm-time-limit", "10", "--cancel-grace", "60").start()
    try:
        out = srv.output()
        check("jobs submitted to Slurm with sbatch (partition debug, time limit 10" in out, "start line: " + out)
        # 1. Submitted, followed to running; its steps recorded (3 epochs: far more than the test waits for).
        a = srv.submit(dict(JOB, epochs=3, save="ckpt"))
        ja = srv.wait(a, ["running"], timeout=120, pred=lambda j: j["progress"] > 0)
        sid = ja["slurm_job_id"]
        check(sid and sid.isdigit(), "slurm_job_id %r" % sid)
        check(squeue_state(sid) == "RUNNING", "squeue says %r" % squeue_state(sid))
        check(ja["argv"][0].endswith("sbatch") and "--ntasks=2" in ja["argv"] and "--partition=debug" in ja["argv"]
              and "--time=10" in ja["argv"] and "--mpi=pmix" in ja["argv"], "argv %s" % ja["argv"])
        print("job %s: Slurm job %s, %s, progress %.3f" % (a, sid, ja["reason"], ja["progress"]))

        # 2. Pending beside it: 8 ranks need every CPU of the one node (the fixture declares 8).
        b = srv.submit(dict(JOB, ranks=8, epochs=1))
        jb = srv.wait(b, ["queued"], timeout=60, pred=lambda j: "PENDING in Slurm" in j["reason"])
        check(jb["slurm_job_id"] and squeue_state(jb["slurm_job_id"]) == "PENDING", "job b: %s" % jb)
        print("job %s: %s" % (b, jb["reason"]))
        check(srv.json("DELETE", "/jobs/" + b, expect=202)["cancel_requested"], "pending cancel")
        jb = srv.wait(b, ["cancelled"], timeout=60)
        check("while pending" in jb["reason"] and jb["started_at"] is None, "job b: %s" % jb)

        # 3. DELETE: SIGTERM to the ranks (scancel --signal=TERM), a stop at a step boundary, a checkpoint.
        jc = srv.json("DELETE", "/jobs/" + a, expect=202)
        check("scancel --signal=TERM" in jc["reason"], "cancel reason: %s" % jc["reason"])
        ja = srv.wait(a, ["cancelled"], timeout=60)
        print("job %s: %s, exit code %s, progress %.3f" % (a, ja["reason"], ja["exit_code"], ja["progress"]))
        check(ja["exit_code"] == 0 and ja["result"] and ja["result"].get("stopped") is True,
              "cancelled job: exit %s, result %s" % (ja["exit_code"], ja["result"]))
        check(0 < ja["progress"] < 1, "progress %s" % ja["progress"])
        ckpts = glob.glob(os.path.join(srv.state_dir, "jobs", a, "ckpt", "ckpt-*"))
        check(ckpts, "no checkpoint written on cancel")
        status, log, _ = srv.curl("GET", "/jobs/%s/log" % a)
        check(status == 200, "log: %d" % status)
        # "1 thread (--threads)": the flags after the batch script reach tandem-train, not sbatch (whose
        # --threads-per-core --threads=1 would abbreviate, were sbatch to read options past the script).
        for needle in ("launched with 2 ranks by srun", "1 thread (--threads)", "SIGTERM: stopping after step",
                       "checkpoint: step"):
            check(needle in log, "log lacks %r:\n%s" % (needle, log[-3000:]))
        print("\n".join(l for l in log.splitlines() if "SIGTERM" in l or "checkpoint" in l or "CANCELLED" in l))

        # 4. One to done, across a restart of the server: Slurm's job is followed again by its id.
        c = srv.submit(dict(JOB, max_steps=300))
        srv.wait(c, ["running"], timeout=120)
        check(srv.stop() == 0, "tandem-serve exited non-zero:\n" + srv.output()[-3000:])
        srv.start()
        check("followed through Slurm again" in srv.output(), "restart: " + srv.output())
        jc = srv.wait(c, ["done"], timeout=180)
        check(jc["exit_code"] == 0 and jc["progress"] == 1 and jc["result"]["world_size"] == 2, "done job: %s" % jc)
        check(squeue_state(jc["slurm_job_id"]) in ("", "COMPLETED", "COMPLETING"), "squeue after done")

        # 5. A batch step that leaves no exit record (as on a node that does not share the state
        # directory): its supervisor SIGKILLed by Slurm; the job fails, saying what to check.
        e = srv.submit(dict(JOB, epochs=3))
        je = srv.wait(e, ["running"], timeout=120)
        r = subprocess.run(["scancel", "--batch", "--signal=KILL", je["slurm_job_id"]], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30)
        check(r.returncode == 0, "scancel --batch: %s" % r.stdout)
        je = srv.wait(e, ["failed"], timeout=120)
        check("without the exit record" in je["reason"] and "must be shared with the Slurm nodes" in je["reason"],
              "no exit record: %s" % je["reason"])
        print("job %s: %s" % (e, je["reason"]))

        # 6. Refused by Slurm: more tasks than the cluster's CPUs.
        d = srv.submit(dict(JOB, ranks=64, max_steps=5))
        jd = srv.wait(d, ["failed"], timeout=60)
        check("could not start: sbatch refused the job" in jd["reason"], "refused job: %s" % jd["reason"])
        print("job %s: %s" % (d, jd["reason"]))

        states = [j["state"] for j in srv.json("GET", "/jobs")]
        check(states == ["cancelled", "cancelled", "done", "failed", "failed"], "states %s" % states)
        check(srv.stop() == 0, "tandem-serve exited non-zero:\n" + srv.output()[-3000:])
    finally:
        srv.stop()
    print("serve slurm: ok")


if __name__ == "__main__":
    main()
