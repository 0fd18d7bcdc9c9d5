"""A tandem-serve under test and curl as its client (tests/serve, scripts/load-serve)."""
import json
import os
import signal
import subprocess
import time


class Server:
    """tandem-serve on a free loopback port (--port 0) with its own state directory."""

    def __init__(self, exe, state_dir, *args):
        self.exe, self.state_dir, self.args = exe, state_dir, list(args)
        self.proc, self.port, self.token = None, None, None
        self.out_path = os.path.join(state_dir + ".out")

    def start(self, timeout=30):
        os.makedirs(self.state_dir, exist_ok=True)
        out = open(self.out_path, "a")
        self.out_start = os.path.getsize(self.out_path)
        self.proc = subprocess.Popen([self.exe, "--port", "0", "--state-dir", self.state_dir] + self.args,
                                     stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.time() + timeout
        while time.time() < deadline:
            text = self.output()
            starts = text.split("listening on http://127.0.0.1:")
            if len(starts) > 1:
                self.port = int(starts[-1].split(" ")[0])
                break
            if self.proc.poll() is not None:
                raise AssertionError("tandem-serve exited with %s:\n%s" % (self.proc.returncode, text))
            time.sleep(0.05)
        else:
            raise AssertionError("tandem-serve did not start:\n" + self.output())
        token_file = os.path.join(self.state_dir, "token")
        if os.path.exists(token_file):
            self.token = open(token_file).read().strip()
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        rc = self.proc.returncode if self.proc else None
        self.proc = None
        return rc

    def output(self):
        """What the latest start printed."""
        with open(self.out_path) as f:
            f.seek(self.out_start)
            return f.read()

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def curl(self, method, path, body=None, token=None, headers=()):
        """(status, body text, response headers) of one request made by curl. token: None for the
        server's own, "" for none, else that string."""
        token = self.token if token is None else token
        cmd = ["curl", "-sS", "-X", method, "-D", "-", "--max-time", "30", self.url(path)]
        if token:
            cmd += ["-H", "Authorization: Bearer " + token]
        for h in headers:
            cmd += ["-H", h]
        if body is not None:
            cmd += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
            if not isinstance(body, (str, bytes)):
                body = json.dumps(body)
        r = subprocess.run(cmd, input=body.encode() if isinstance(body, str) else body,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        if r.returncode != 0:
            raise AssertionError("curl %s %s failed: %s" % (method, path, r.stderr.decode()))
        raw = r.stdout.decode()
        head, _, text = raw.partition("\r\n\r\n")
        lines = head.split("\r\n")
        status = int(lines[0].split(" ")[1])
        hdrs = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
        return status, text, hdrs

    def json(self, method, path, body=None, token=None, expect=200):
        status, text, _ = self.curl(method, path, body, token)
        assert status == expect, "%s %s: %d, expected %d: %s" % (method, path, status, expect, text)
        return json.loads(text)

    def submit(self, request):
        return self.json("POST", "/jobs", request, expect=201)["id"]

    def wait(self, job_id, states, timeout=120, pred=None):
        """Polls GET /jobs/{id} until its state is in `states` (and pred(job) holds)."""
        deadline = time.time() + timeout
        job = None
        while time.time() < deadline:
            job = self.json("GET", "/jobs/" + job_id)
            if job["state"] in states and (pred is None or pred(job)):
                return job
            assert job["state"] in ("queued", "running") or job["state"] in states, \
                "job %s ended %s: %s\n%s" % (job_id, job["state"], job.get("reason"), job.get("errors"))
            time.sleep(0.2)
        raise AssertionError("job %s not %s after %d s: %s" % (job_id, states, timeout, job))


def session_pids(sid):
    """Live (non-zombie) processes of session `sid`."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = open("/proc/%s/stat" % name).read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            out.append(int(name))
    return out
