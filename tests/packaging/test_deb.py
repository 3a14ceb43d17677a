"""`make deb` (packaging/deb/build-deb.sh, issue 26): the package is built from this build tree
with dpkg-deb, unpacked with `dpkg-deb -x` into a temporary root, and checked there: control
fields and dependencies, conffiles and maintainer scripts, the files (skyprofd, the CLI,
libskyprof and its headers, the web UI, the unit and its environment file), the binaries run from
the unpacked root with no LD_LIBRARY_PATH, skyprofd.service passes `systemd-analyze verify` and
`systemd-analyze security --offline` (exposure at most 2.0), and skyprofd started the way the
unit starts it (its environment file) serves the packaged UI and the API the packaged CLI uses."""
import os
import re
import shlex
import shutil
import subprocess
import urllib.request

from skp_harness import BUILD_DIR, SOURCE_DIR, Proc, Results, listening_port, tempdir

R = Results()
UNIT = "lib/systemd/system/skyprofd.service"


def clean_env(**extra):
    env = dict(os.environ)
    for k in ("LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH"):
        env.pop(k, None)
    env.update(extra)
    return env


def sh(*args, **kw):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=kw.pop("timeout", 120), **kw)
    return p.returncode, p.stdout, p.stderr


def build(d):
    rc, out, err = sh(os.path.join(SOURCE_DIR, "packaging", "deb", "build-deb.sh"), BUILD_DIR,
                      os.path.join(d, "out"))
    assert rc == 0, err
    deb = out.strip().splitlines()[-1]
    assert re.search(r"/skyprof_\d+\.\d+\.\d+_[a-z0-9]+\.deb$", deb) and os.path.exists(deb), out
    return deb


def unit_settings(path):
    kv = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            k, v = line.split("=", 1)
            kv.setdefault(k, []).append(v)
    return kv


def check_control(deb, d):
    rc, out, _ = sh("dpkg-deb", "-f", deb)
    f = dict(re.findall(r"^([A-Za-z-]+): (.*)$", out, re.M))
    assert f["Package"] == "skyprof" and re.match(r"^\d+\.\d+\.\d+$", f["Version"]), f
    deps = f["Depends"]
    for pkg in ("adduser", "libc6", "libjansson4", "libsqlite3-0", "libpq5", "libnghttp2-14",
                "libprotobuf-c1", "libunwind8", "libdw1", "libevent-2.1-7"):
        assert re.search(r"(^|, )%s \(>= [^)]+\)" % re.escape(pkg), deps) or pkg == "adduser", (pkg, deps)
    ctrl = os.path.join(d, "control")
    rc, _, err = sh("dpkg-deb", "-e", deb, ctrl)
    assert rc == 0, err
    assert open(os.path.join(ctrl, "conffiles")).read().split() == ["/etc/skyprof/skyprofd.env"]
    for s in ("postinst", "prerm", "postrm"):
        p = os.path.join(ctrl, s)
        assert os.access(p, os.X_OK), s
        rc, _, err = sh("sh", "-n", p)
        assert rc == 0, (s, err)
    post = open(os.path.join(ctrl, "postinst")).read()
    assert "adduser --system" in post and "--ingroup skyprof" in post, post
    assert "install -d -o skyprof -g skyprof -m 0750 /var/lib/skyprof" in post, post
    assert "chmod 0640 /etc/skyprof/skyprofd.env" in post, post


def check_files(root):
    for rel in ("usr/bin/skyprof", "usr/bin/skyprofd", "usr/lib/libskyprof.so.0",
                "usr/include/skyprof/skyprof.h", "usr/share/skyprof/web/index.html", UNIT,
                "etc/skyprof/skyprofd.env", "usr/share/doc/skyprof/deploy.md",
                "usr/share/doc/skyprof/copyright"):
        assert os.path.exists(os.path.join(root, rel)), rel
    assert not os.path.exists(os.path.join(root, "usr/bin/demo_service"))
    for exe, args, want in [("skyprof", ["--version"], "skyprof "), ("skyprof", ["--help"], "ebpf list"),
                            ("skyprofd", ["--version"], "skyprofd"), ("skyprofd", ["--help"], "SKYPROF_DB")]:
        rc, out, err = sh(os.path.join(root, "usr", "bin", exe), *args, env=clean_env())
        assert rc == 0 and want in out + err, (exe, args, rc, out, err)
    rc, out, _ = sh("ldd", os.path.join(root, "usr/bin/skyprof"), env=clean_env())
    assert "%s/usr/bin/../lib/libskyprof.so.0 " % root in out and "not found" not in out, out


def check_unit_text(root):
    u = unit_settings(os.path.join(root, UNIT))
    want = {"User": "skyprof", "Group": "skyprof", "StateDirectory": "skyprof",
            "WorkingDirectory": "/var/lib/skyprof", "EnvironmentFile": "/etc/skyprof/skyprofd.env",
            "Restart": "on-failure", "NoNewPrivileges": "yes", "ProtectSystem": "strict",
            "PrivateTmp": "yes", "ProtectHome": "yes", "PrivateDevices": "yes",
            "CapabilityBoundingSet": "", "WantedBy": "multi-user.target"}
    for k, v in want.items():
        assert u.get(k, [None])[0] == v, (k, u.get(k))
    assert u["ExecStart"] == ["/usr/bin/skyprofd $SKYPROFD_OPTS"], u["ExecStart"]


def check_systemd_analyze(root):
    exe = shutil.which("systemd-analyze")
    assert exe, "systemd-analyze is missing: scripts/bootstrap installs it (Debian package systemd)"
    # `verify --root` resolves the unit's dependencies (sysinit.target, ...) inside the root:
    # give it the host's unit files, as the package lands beside them on a real system.
    units = os.path.join(root, "lib", "systemd", "system")
    for name in os.listdir("/lib/systemd/system"):
        src = os.path.join("/lib/systemd/system", name)
        if not os.path.exists(os.path.join(units, name)) and os.path.isfile(src):
            shutil.copy(src, units, follow_symlinks=True)
    # Can it run here at all? A trivial unit must verify cleanly; if not, say so loudly.
    with open(os.path.join(units, "skp-probe.service"), "w") as f:
        f.write("[Service]\nExecStart=/usr/bin/skyprofd --version\n")
    rc, out, err = sh(exe, "verify", "--root=" + root, "skp-probe.service")
    os.unlink(os.path.join(units, "skp-probe.service"))
    if rc != 0 or err.strip():
        raise AssertionError("systemd-analyze cannot verify units in this environment "
                             "(rc %d): %s" % (rc, err.strip()))
    rc, out, err = sh(exe, "verify", "--root=" + root, "skyprofd.service")
    assert rc == 0 and not err.strip() and not out.strip(), (rc, out, err)
    # the check catches mistakes: an unknown key is reported
    bad = os.path.join(units, "skp-bad.service")
    with open(bad, "w") as f:
        f.write(open(os.path.join(units, "skyprofd.service")).read().replace("ProtectSystem=", "ProtectSystm="))
    rc, out, err = sh(exe, "verify", "--root=" + root, "skp-bad.service")
    os.unlink(bad)
    assert "Unknown key" in err, (rc, err)
    rc, out, err = sh(exe, "security", "--offline=true", "--root=" + root, "skyprofd.service")
    m = re.search(r"Overall exposure level for skyprofd\.service: (\d+\.\d+)", out + err)
    assert m, out + err
    level = float(m.group(1))
    print("     systemd-analyze verify: clean; security exposure level %.1f" % level)
    assert level <= 2.0, out


def env_file(path):
    env = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith("#"):
            k, v = line.split("=", 1)
            env[k] = v
    return env


def check_service_run(root, d):
    envf = os.path.join(root, "etc", "skyprof", "skyprofd.env")
    # every variable the file names (set or commented out) is one skyprofd reads
    rc, helptext, _ = sh(os.path.join(root, "usr/bin/skyprofd"), "--help", env=clean_env())
    names = set(re.findall(r"^#?\s*(SKYPROF[A-Z_]*)=", open(envf).read(), re.M))
    assert {"SKYPROF_GRPC_ADDR", "SKYPROF_HTTP_ADDR", "SKYPROF_DB", "SKYPROFD_OPTS"} <= names, names
    for n in names - {"SKYPROFD_OPTS"}:
        assert n in helptext, (n, "not in skyprofd --help")
    env = env_file(envf)
    assert env["SKYPROF_DB"] == "/var/lib/skyprof/skyprof.db", env
    # as the unit runs it: the environment file, $SKYPROFD_OPTS as words, the state directory as
    # the working directory (here a temporary one, and ports the test can have)
    state = os.path.join(d, "var-lib-skyprof")
    os.makedirs(state)
    env.update(SKYPROF_GRPC_ADDR="127.0.0.1:0", SKYPROF_HTTP_ADDR="127.0.0.1:0",
               SKYPROF_DB=os.path.join(state, "skyprof.db"))
    with Proc([os.path.join(root, "usr/bin/skyprofd")] + shlex.split(env.pop("SKYPROFD_OPTS", "")),
              env=dict(clean_env(), **env), cwd=state, name="skyprofd-deb") as p:
        port = listening_port(p, "skyprofd: http")
        with urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=10) as r:
            page = r.read()
        assert page == open(os.path.join(root, "usr/share/skyprof/web/index.html"), "rb").read()
        rc, out, err = sh(os.path.join(root, "usr/bin/skyprof"), "--server",
                          "http://127.0.0.1:%d" % port, "services", env=clean_env())
        assert rc == 0, (out, err)
        assert os.path.exists(os.path.join(state, "skyprof.db"))
        assert p.stop() == 0, p.output()


def t_deb():
    with tempdir() as d:
        deb = build(d)
        check_control(deb, d)
        root = os.path.join(d, "root")
        rc, _, err = sh("dpkg-deb", "-x", deb, root)
        assert rc == 0, err
        check_files(root)
        check_unit_text(root)
        check_systemd_analyze(root)
        check_service_run(root, d)


if __name__ == "__main__":
    R.run("make deb: unpacked, binaries run, unit verified, service runs from its env file", t_deb)
    R.finish()
