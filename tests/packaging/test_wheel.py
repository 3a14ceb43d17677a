"""`make wheel` (packaging/build-wheel.sh, issue 26): the Python agent built as a wheel for the
system CPython 3.11 with Debian's pip/setuptools (no PyPI), installed with pip into a fresh
virtualenv (no system site packages, no PYTHONPATH, not run from the source tree), profiles the
seed's example service (examples/python/seed_app.py) end to end against a real skyprofd: the CLI
waits until the agent fetched the task, nine POST requests are profiled, and the merged tree
shows method3 -> method2 -> method1 with their known durations (20 ms of sleep each per request:
inclusive 60, 40 and 20 ms) within the sampling's stated error (docs/accuracy.md: the start of
each request before its first dump is not in the profile)."""
import json
import os
import re
import subprocess
import sys
import urllib.request
import zipfile

from skp_harness import (SOURCE_DIR, Proc, Results, build_path, listening_port, start_skyprofd,
                         tempdir)

R = Results()
CLI = build_path("src", "cli", "skyprof")
PY = "/usr/bin/python3"
N = 9  # requests profiled (the most one task samples per instance)


def clean_env(**extra):
    env = dict(os.environ)
    for k in ("LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONHOME"):
        env.pop(k, None)
    env.update(extra)
    return env


def cli(port, *args, timeout=120):
    p = subprocess.run([CLI, "--server", "http://127.0.0.1:%d" % port] + list(args),
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def inclusive_by_function(doc):
    """Inclusive duration per function label (summed over the trees' nodes of that function)."""
    tot = {}
    for t in doc["trees"]:
        for e in t["elements"]:
            m = re.search(r"seed_app\.py\.(\w+)", e["codeSignature"])
            if m:
                tot[m.group(1)] = tot.get(m.group(1), 0) + e["duration"]
    return tot


def t_wheel_in_venv():
    with tempdir() as d:
        p = subprocess.run([os.path.join(SOURCE_DIR, "packaging", "build-wheel.sh"), os.path.join(d, "out")],
                           capture_output=True, text=True, timeout=600, env=clean_env())
        assert p.returncode == 0, p.stderr[-3000:]
        whl = p.stdout.strip().splitlines()[-1]
        assert re.search(r"/skyprof-\d+\.\d+\.\d+-cp311-cp311-linux_[a-z0-9_]+\.whl$", whl), whl
        names = zipfile.ZipFile(whl).namelist()
        assert "skyprof/__init__.py" in names and any(re.match(r"skyprof/_skyprof\..*\.so$", n) for n in names), names
        assert not os.path.exists(os.path.join(SOURCE_DIR, "python", "build")), "built in the source tree"

        venv = os.path.join(d, "venv")
        subprocess.run([PY, "-m", "venv", venv], check=True, timeout=120, env=clean_env())
        vpy = os.path.join(venv, "bin", "python")
        p = subprocess.run([vpy, "-m", "pip", "install", "-q", "--no-index", "--no-deps", whl],
                           capture_output=True, text=True, timeout=300, env=clean_env(), cwd=d)
        assert p.returncode == 0, p.stdout + p.stderr
        where = subprocess.run([vpy, "-c", "import skyprof, sys; print(skyprof.__file__, sys.prefix)"],
                               capture_output=True, text=True, env=clean_env(), cwd=d)
        assert where.returncode == 0 and where.stdout.startswith(venv + "/lib/python3.11/site-packages/skyprof/"), where

        server = start_skyprofd(d)
        try:
            app = Proc([vpy, os.path.join(SOURCE_DIR, "examples", "python", "seed_app.py"), "0"], cwd=d,
                       env=clean_env(SW_AGENT_COLLECTOR_BACKEND_SERVICES=server.grpc_target,
                                     SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL="1",
                                     SEED_LOG_LEVEL="INFO"), name="seed_app")
            with app:
                app_port = listening_port(app, "seed_app:")
                rc, out, err = cli(server.http_port, "task", "create", "--service", "provider",
                                   "--endpoint", "/", "--duration", "1", "--max-sampling-count", str(N),
                                   "--wait", "--wait-timeout", "60")
                assert rc == 0 and "fetched the task" in err, (rc, out, err, app.output()[-3000:])
                tid = out.strip()
                for _ in range(N):
                    req = urllib.request.Request("http://127.0.0.1:%d/" % app_port, data=b"{}", method="POST")
                    with urllib.request.urlopen(req, timeout=30) as r:
                        assert r.status == 200
                rc, out, err = cli(server.http_port, "--json", "analyze", "--task", tid, "--wait", "60")
                assert rc == 0, (rc, err, app.output()[-3000:])
                tot = inclusive_by_function(json.loads(out))
                m1, m2, m3 = tot.get("method1", 0), tot.get("method2", 0), tot.get("method3", 0)
                # Ground truth per request: method3 60 ms (20 + method2), method2 40, method1 20.
                # The stated error (docs/accuracy.md): each change of stack is placed at the
                # first dump after it, a uniform instant of its 10 ms period, so a 20 ms
                # function's inclusive time is off by about 5 ms per request either way
                # (statistical: about 8 % of method1's over nine requests), and the time before a
                # request's first dump is missing (up to a period, method3's). Each function
                # within 25 % of its truth (method3's less the start's loss), and each one's own
                # time visible.
                assert 0.75 * 20 * N <= m1 <= 1.25 * 20 * N, tot
                assert 0.75 * 40 * N <= m2 <= 1.25 * 40 * N, tot
                assert 0.75 * 50 * N <= m3 <= 1.25 * 60 * N, tot
                assert m2 - m1 >= 0.5 * 20 * N and m3 - m2 >= 0.5 * 10 * N, tot
                rc, out, err = cli(server.http_port, "analyze", "--task", tid)
                assert rc == 0 and "method3  seed_app.py:" in out and "method1  seed_app.py:" in out, out
                assert "_skyprof" not in out, out
                print("     inclusive ms over %d requests:" % N + " method3 %d, method2 %d, method1 %d" % (m3, m2, m1))
        finally:
            server.stop()


if __name__ == "__main__":
    R.run("make wheel: installed in a fresh venv, profiles the seed app", t_wheel_in_venv)
    R.finish()
