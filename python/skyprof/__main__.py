"""``python -m skyprof run app.py [args...]`` (or ``run -m module [args...]``): starts the agent,
configured from the SW_AGENT_* environment, then runs the application as __main__.
``python -m skyprof run COMMAND [args...]`` (a program on PATH that is not a Python file, e.g.
``uwsgi``): executes it with the bootstrap on PYTHONPATH, so the Python it embeds or starts runs
the agent (as SkyWalking's ``sw-python run COMMAND``).

It also puts skyprof's bootstrap (skyprof/bootstrap/sitecustomize.py) first on PYTHONPATH, so
every Python process the application starts - reloader children, multiprocessing spawn workers,
uvicorn/gunicorn/uWSGI workers - starts its own agent (``SKYPROF_BOOTSTRAP=0`` turns that off).
A process that only supervises others starts none (see skyprof._roles)."""
import os
import runpy
import sys

USAGE = 'usage: python -m skyprof run (script.py | -m module | command) [args...]'


def _export_bootstrap(exe=True):
    """Environment for the children: bootstrap dir and skyprof's own location on PYTHONPATH.
    ``exe``: only processes of this interpreter run the bootstrap (the extension is built per
    version); off for a command that embeds its own (uWSGI)."""
    import skyprof
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(skyprof.__file__)))
    boot = os.path.join(os.path.dirname(os.path.abspath(skyprof.__file__)), 'bootstrap')
    parts = [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]
    parts = [p for p in parts if os.path.abspath(p) != boot]
    if pkg_parent not in (os.path.abspath(p) for p in parts):
        parts.insert(0, pkg_parent)
    os.environ['PYTHONPATH'] = os.pathsep.join([boot] + parts)
    os.environ.setdefault('SKYPROF_RUN_ROOT_PID', str(os.getpid()))
    if exe:
        os.environ['SKYPROF_BOOTSTRAP_EXE'] = sys.executable
    else:
        os.environ.pop('SKYPROF_BOOTSTRAP_EXE', None)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] != 'run':
        sys.stderr.write(USAGE + '\n')
        return 2
    if argv[1] == '-m' and len(argv) < 3:
        sys.stderr.write(USAGE + '\n')
        return 2
    if argv[1] != '-m' and not os.path.isfile(argv[1]):
        import shutil
        exe = shutil.which(argv[1])
        if exe is None:
            sys.stderr.write('skyprof: %s: no such file or command\n%s\n' % (argv[1], USAGE))
            return 2
        _export_bootstrap(exe=False)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(exe, [argv[1]] + argv[2:])
    from skyprof import _roles, agent, instrument
    if os.environ.get('SKYPROF_BOOTSTRAP', '1') != '0':
        _export_bootstrap()
    program = argv[2] if argv[1] == '-m' else argv[1]
    rest = argv[3:] if argv[1] == '-m' else argv[2:]
    instrument.install_all()
    reason = _roles.supervisor_reason(program, rest)
    if reason:
        _roles.mark_supervisor(reason)
    else:
        agent.start()
    if argv[1] == '-m':
        sys.argv = [argv[2]] + argv[3:]
        runpy.run_module(argv[2], run_name='__main__', alter_sys=True)
    else:
        path = argv[1]
        sys.argv = [path] + argv[2:]
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        runpy.run_path(os.path.abspath(path), run_name='__main__')
    return 0


if __name__ == '__main__':
    sys.exit(main())
