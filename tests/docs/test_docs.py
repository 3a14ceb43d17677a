"""The documentation's shell examples, run as written (issue 26).

A fenced block whose info string is `sh runnable` (GitHub shows it as plain sh) is extracted from
README.md and docs/*.md and run, in the order of its page, in one bash session per page (`set -euo
pipefail`: a failing command fails the block; variables carry from block to block). Words after
`runnable` say what the block needs:
  background    run it in the background (a server: the reader's "second terminal")
  port=N        ...and go on once 127.0.0.1:N accepts connections (60 s at most)
  needs=skyprofd  a skyprofd on the default ports (gRPC 11800, HTTP 12800) started first
  needs=app     that skyprofd and the seed's example service (examples/python/seed_app.py,
                service "provider", POST / on 127.0.0.1:9090, the Python agent inside)
The session runs where a reader of a fresh clone would stand: a directory holding the
repository's examples/, python/, scripts/, docs/, web/ and build/release (this test's build
directory), with `skyprof` and `skyprofd` on PATH, /usr/bin's python3 (in the ASan build with
libasan preloaded, as tests/python runs it), and `make` standing in
for the build already made (only `make release` is accepted). Each page gets a network
namespace of its own (unshare), so the documented default ports are free and nothing leaks out;
agents poll for tasks every second (SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL=1) instead of
20 so the run stays short. A page's blocks get 240 s together.

Static checks over every sh block (runnable or not): a curl that sends a body (-d/--data) names
`Content-Type: application/json` (skyprofd answers 415 otherwise), and flamegraph.pl is never
piped into without saying where it comes from."""
import os
import re
import shutil
import signal
import subprocess
import sys

from skp_harness import BUILD_DIR, SANITIZE, SOURCE_DIR, Results, tempdir

R = Results()
PAGES = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(SOURCE_DIR, "docs"))
                               if f.endswith(".md"))
FENCE = re.compile(r"^```(\S*)(.*)$")


def blocks(page):
    """(line, info words, text) of every fenced block with language sh."""
    out = []
    lines = open(os.path.join(SOURCE_DIR, page), encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang, rest = m.group(1), m.group(2).split()
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        if lang == "sh":
            out.append((start + 1, rest, "\n".join(body) + "\n"))
    return out


def options(words):
    o = {"background": False, "port": None, "needs": None}
    for w in words[1:]:
        if w == "background":
            o["background"] = True
        elif w.startswith("port="):
            o["port"] = int(w[5:])
        elif w.startswith("needs="):
            o["needs"] = w[6:]
            assert o["needs"] in ("skyprofd", "app"), w
        else:
            raise AssertionError("unknown runnable option %r" % w)
    return o


PRELUDE = r'''
set -euo pipefail
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
skp_block() { echo "skp-docs: block $1 ($2)" >&2; }
skp_wait_port() {  # PORT LOG: until 127.0.0.1:PORT accepts, 60 s at most
  local i
  for i in $(seq 1 600); do
    if (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "skp-docs: nothing listens on 127.0.0.1:$1 after 60 s; its log:" >&2
  tail -n 40 "$2" >&2 || true
  return 1
}
SKP_HAVE_SKYPROFD=0
SKP_HAVE_APP=0
skp_need_skyprofd() {
  if [ "$SKP_HAVE_SKYPROFD" = 1 ]; then return 0; fi
  skyprofd --db "$SKP_FIX/fixture.db" > "$SKP_FIX/skyprofd.log" 2>&1 &
  skp_wait_port 12800 "$SKP_FIX/skyprofd.log"
  SKP_HAVE_SKYPROFD=1
}
skp_need_app() {
  skp_need_skyprofd
  if [ "$SKP_HAVE_APP" = 1 ]; then return 0; fi
  SEED_LOG_LEVEL=INFO PYTHONPATH="$SKP_PYPKG" python3 "$SKP_SRC/examples/python/seed_app.py" 9090 \
    > "$SKP_FIX/seed_app.log" 2>&1 &
  skp_wait_port 9090 "$SKP_FIX/seed_app.log"
  SKP_HAVE_APP=1
}
'''


def page_script(page, runnable, logs):
    parts = [PRELUDE]
    for n, (line, words, text) in enumerate(runnable, 1):
        o = options(words)
        where = "%s:%d" % (page, line)
        parts.append("skp_block %d %q\n".replace("%q", "'%s'") % (n, where))
        if o["needs"] == "skyprofd":
            parts.append("skp_need_skyprofd\n")
        elif o["needs"] == "app":
            parts.append("skp_need_app\n")
        if o["background"]:
            log = os.path.join(logs, "block%d.log" % n)
            parts.append("(\n%s) > '%s' 2>&1 &\n" % (text, log))
            if o["port"]:
                parts.append("skp_wait_port %d '%s'\n" % (o["port"], log))
        else:
            parts.append(text)
    parts.append("echo 'skp-docs: all blocks done' >&2\n")
    return "".join(parts)


def python_pkg():
    d = os.path.join(BUILD_DIR, "python")
    for name in sorted(os.listdir(d)):
        if name.startswith("cp3112"):
            return os.path.join(d, name)
    raise AssertionError("no cp3112 build of the Python package under %s" % d)


def sandbox(tmp):
    """The reader's checkout: the repository's folders, build/release = this build."""
    work = os.path.join(tmp, "work")
    os.makedirs(os.path.join(work, "build"))
    for name in ("examples", "python", "scripts", "docs", "web", "proto", "include", "src"):
        os.symlink(os.path.join(os.path.abspath(SOURCE_DIR), name), os.path.join(work, name))
    os.symlink(os.path.abspath(BUILD_DIR), os.path.join(work, "build", "release"))
    binp = os.path.join(tmp, "bin")
    os.makedirs(binp)
    os.symlink(os.path.join(BUILD_DIR, "src", "cli", "skyprof"), os.path.join(binp, "skyprof"))
    os.symlink(os.path.join(BUILD_DIR, "src", "server", "skyprofd"), os.path.join(binp, "skyprofd"))
    with open(os.path.join(binp, "make"), "w") as f:
        f.write("#!/bin/sh\n# docs test: build/release is the test's own, already built\n"
                "for t in \"$@\"; do [ \"$t\" = release ] || "
                "{ echo \"make (docs test): only 'make release' runs here, not '$t'\" >&2; exit 2; }; done\n"
                "echo 'make (docs test): build/release is already built'\n")
    os.chmod(os.path.join(binp, "make"), 0o755)
    if SANITIZE:
        # The ASan build's extension is instrumented: its interpreter runs with libasan first,
        # as tests/python does (CPython keeps objects alive at exit: no leak check).
        asan = subprocess.run(["cc", "-print-file-name=libasan.so"], capture_output=True,
                              text=True).stdout.strip()
        with open(os.path.join(binp, "python3"), "w") as f:
            f.write("#!/bin/sh\n# docs test, ASan build: the instrumented extension needs libasan\n"
                    "LD_PRELOAD=%s ASAN_OPTIONS=detect_leaks=0 PYTHONMALLOC=malloc "
                    "exec /usr/bin/python3 \"$@\"\n" % asan)
        os.chmod(os.path.join(binp, "python3"), 0o755)
    return work, binp


def run_page(page):
    runnable = [b for b in blocks(page) if b[1] and b[1][0] == "runnable"]
    if not runnable:
        return 0
    with tempdir(prefix="skp-docs-") as tmp:
        work, binp = sandbox(tmp)
        logs = os.path.join(tmp, "logs")
        fix = os.path.join(tmp, "fixture")
        os.makedirs(logs)
        os.makedirs(fix)
        script = os.path.join(tmp, "page.sh")
        with open(script, "w") as f:
            f.write(page_script(page, runnable, logs))
        env = {"PATH": binp + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOME": tmp, "LANG": "C.UTF-8", "COLUMNS": "120", "TERM": "dumb",
               "SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL": "1",
               "SKP_FIX": fix, "SKP_SRC": os.path.abspath(SOURCE_DIR), "SKP_PYPKG": python_pkg()}
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
            if k in os.environ:
                env[k] = os.environ[k]
        # A network namespace of its own: the documented default ports are this page's.
        cmd = ["unshare", "--net", "--map-root-user", "--", "bash", "-c",
               "ip link set lo up && exec bash \"$0\"", script]
        p = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            raise AssertionError("%s: the runnable blocks took over 240 s:\n%s" % (page, out.decode(errors="replace")[-6000:]))
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        text = out.decode(errors="replace")
        if p.returncode != 0 or "skp-docs: all blocks done" not in text:
            extra = ""
            for name in sorted(os.listdir(logs)) + ["../fixture/" + n for n in sorted(os.listdir(fix))]:
                path = os.path.join(logs, name)
                if name.endswith(".log") and os.path.exists(path):
                    extra += "\n---- %s ----\n%s" % (name, open(path, errors="replace").read()[-3000:])
            raise AssertionError("%s: a runnable block failed (exit %d):\n%s%s" % (
                page, p.returncode, text[-8000:], extra))
        for bad in ("AddressSanitizer", "runtime error:", "LeakSanitizer"):
            assert bad not in text, text[-6000:]
        if os.environ.get("SKP_DOCS_VERBOSE"):
            print(text)
        print("     %s: %d runnable block(s) ran" % (page, len(runnable)))
        return len(runnable)


def t_static_checks():
    problems = []
    for page in PAGES:
        for line, words, text in blocks(page):
            cmds = re.split(r"(?<!\\)\n", text)
            for c in cmds:
                if re.search(r"\bcurl\b", c) and re.search(r"\s(-d|--data(-binary|-raw)?)[\s=]", c) \
                        and "Content-Type: application/json" not in c:
                    problems.append("%s:%d: curl with a body but no -H 'Content-Type: application/json': %s"
                                    % (page, line, c.strip()[:120]))
                if "| flamegraph.pl" in c:
                    problems.append("%s:%d: flamegraph.pl without saying where it comes from" % (page, line))
    assert not problems, "\n".join(problems)


def t_unshare():
    p = subprocess.run(["unshare", "--net", "--map-root-user", "--", "ip", "link", "set", "lo", "up"],
                       capture_output=True, text=True)
    assert p.returncode == 0, ("the docs test needs a network namespace of its own (unshare --net "
                               "--map-root-user, util-linux) and cannot make one here: " + p.stderr)


def main():
    R.run("curl examples send Content-Type; flamegraph.pl named", t_static_checks)
    R.run("a network namespace for the examples", t_unshare)
    total = [0]
    for page in PAGES:
        R.run("%s: runnable blocks" % page, lambda pg=page: total.__setitem__(0, total[0] + run_page(pg)))
    print("     %d runnable block(s) in all" % total[0])
    R.run("some blocks are runnable", lambda: None if total[0] >= 5 else (_ for _ in ()).throw(
        AssertionError("only %d runnable blocks" % total[0])))
    R.finish()


if __name__ == "__main__":
    main()
