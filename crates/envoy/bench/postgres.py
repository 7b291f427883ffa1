"""A PostgreSQL for the store benches: initdb in a temp dir, `postgres` on a free port of
127.0.0.1 (TCP only, trust auth, user `idemgate`), its durability settings left at PostgreSQL's
defaults (fsync on, synchronous_commit on: a claim is on disk before it is answered). As root,
PostgreSQL refuses to run: initdb and the server then run as the `postgres` user. Debian's
`postgresql` keeps its binaries in /usr/lib/postgresql/<version>/bin: found there when not on PATH.
Stdlib only; the caller stops the returned server (by its PID: SIGINT, a fast shutdown)."""
import ctypes
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time


# Loaded here: the child runs as `postgres` by then, and may not read this interpreter's modules.
_LIBC = ctypes.CDLL("libc.so.6", use_errno=True)


def _die_with_parent():
    """Child side: SIGTERM when the bench dies, even by SIGKILL (PR_SET_PDEATHSIG)."""
    _LIBC.prctl(1, signal.SIGTERM)


def binary(name):
    found = shutil.which(name) or (sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [None])[-1]
    if not found:
        raise SystemExit(f"`{name}` is not installed: run `make setup-postgres`")
    return found


def version():
    try:
        out = subprocess.run([binary("postgres"), "--version"], capture_output=True, text=True)
        found = re.search(r"\d+\.\d+", out.stdout)
        return found.group(0) if found else "?"
    except OSError:
        return "?"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, proc, url, work):
        self.proc, self.url, self.work = proc, url, work

    def stop(self):
        """Fast shutdown (SIGINT), then SIGKILL after 10 s; the temp dir removed."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.work, ignore_errors=True)


def start():
    """initdb in a fresh temp dir and a server on a free port: a `Server` (proc, url)."""
    work = tempfile.mkdtemp(prefix="idemgate-bench-postgres-")
    try:
        return _start(work)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _start(work):
    user = {}
    data = os.path.join(work, "data")
    if os.geteuid() == 0:
        import pwd
        pw = pwd.getpwnam("postgres")
        user = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
        os.chmod(work, 0o755)
        os.chown(work, pw.pw_uid, pw.pw_gid)
    out = subprocess.run(
        [binary("initdb"), "-D", data, "-U", "idemgate", "--auth=trust", "-E", "UTF8", "--locale=C",
         "--no-sync", "--no-instructions"], cwd=work, capture_output=True, text=True, **user)
    if out.returncode != 0:
        raise SystemExit(f"initdb failed: {out.stderr.strip()}")
    port = _free_port()
    log_path = os.path.join(work, "postgres.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [binary("postgres"), "-D", data, "-p", str(port), "-c", "listen_addresses=127.0.0.1",
             "-c", "unix_socket_directories=", "-c", "max_connections=200"],
            cwd=work, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent, **user)
    server = Server(proc, f"postgres://idemgate@127.0.0.1:{port}/postgres", work)
    deadline = time.monotonic() + 30
    while "ready to accept connections" not in open(log_path).read():
        if proc.poll() is not None or time.monotonic() > deadline:
            text = open(log_path).read()
            server.stop()
            raise SystemExit(f"postgres did not start:\n{text}")
        time.sleep(0.05)
    return server
