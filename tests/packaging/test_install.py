"""`make install` (cmake --install) gives binaries that run from any prefix (issue 26): the CLI
and skyprofd find the installed libskyprof.so.0 through a relative runtime path
($ORIGIN/../lib), with no LD_LIBRARY_PATH, also after the prefix is moved elsewhere."""
import os
import re
import shutil
import subprocess

from skp_harness import BUILD_DIR, Results, tempdir

R = Results()


def clean_env():
    env = dict(os.environ)
    for k in ("LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH"):
        env.pop(k, None)
    return env


def run_all(prefix):
    # (demo_service prints its usage and exits 2 on --help: it has no help option.)
    for exe, args, want, rc in [("skyprof", ["--help"], "Usage: skyprof", 0),
                                ("skyprof", ["--version"], "skyprof ", 0),
                                ("skyprofd", ["--help"], "usage: skyprofd", 0),
                                ("skyprofd", ["--version"], "skyprofd", 0),
                                ("demo_service", ["--help"], "usage: demo_service", 2)]:
        p = subprocess.run([os.path.join(prefix, "bin", exe)] + args, env=clean_env(),
                           capture_output=True, text=True, timeout=30)
        out = p.stdout + p.stderr
        assert p.returncode == rc and want in out, (exe, args, p.returncode, out[-2000:])


def t_any_prefix():
    with tempdir() as d:
        prefix = os.path.join(d, "any where", "prefix")    # a space in the path too
        p = subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", prefix],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        cli = os.path.join(prefix, "bin", "skyprof")
        lib = os.path.join(prefix, "lib", "libskyprof.so.0")
        assert os.path.exists(lib), os.listdir(os.path.join(prefix, "lib"))
        run_all(prefix)
        # The CLI loads the installed library (not the build tree's) through a relative RUNPATH.
        dyn = subprocess.run(["readelf", "-d", cli], capture_output=True, text=True).stdout
        m = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]", dyn)
        assert m and m.group(1) == "$ORIGIN/../lib", dyn
        ldd = subprocess.run(["ldd", cli], capture_output=True, text=True, env=clean_env()).stdout
        want = "libskyprof.so.0 => %s/bin/../lib/libskyprof.so.0 " % prefix
        assert want in ldd and "not found" not in ldd, ldd
        # A prefix moved after the install still works.
        moved = os.path.join(d, "moved")
        shutil.move(prefix, moved)
        run_all(moved)
        ldd = subprocess.run(["ldd", os.path.join(moved, "bin", "skyprof")], capture_output=True,
                             text=True, env=clean_env()).stdout
        assert "not found" not in ldd and "%s/bin/../lib/libskyprof.so.0 " % moved in ldd, ldd


if __name__ == "__main__":
    R.run("make install: binaries run from any prefix, also moved", t_any_prefix)
    R.finish()
