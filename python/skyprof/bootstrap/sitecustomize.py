"""skyprof's bootstrap for the processes below ``python -m skyprof run`` (the shape of
SkyWalking's sitecustomize loader): ``run`` puts this directory first on PYTHONPATH, so every
Python process started under it - reloader children, multiprocessing spawn workers, uvicorn
workers, uWSGI - imports this module at interpreter start-up. It runs the application's own
sitecustomize (if any), then starts the agent unless the process only supervises others
(skyprof._roles). It never raises: a failure leaves the process running without the agent."""
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def _chain_user_sitecustomize():
    import importlib
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or '.') != _here]
    ours = sys.modules.pop('sitecustomize', None)
    try:
        importlib.import_module('sitecustomize')
    except ImportError:
        pass
    except Exception as e:  # the user's own module failed: say so, as Python would
        sys.stderr.write('Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%r\n' % (e,))
    finally:
        sys.path[:] = saved
        if ours is not None:
            sys.modules['sitecustomize'] = ours


def _program():
    argv = list(getattr(sys, 'orig_argv', None) or [])
    if not argv:  # an embedding program (uWSGI) sets no argv: read the process's own
        try:
            with open('/proc/self/cmdline', 'rb') as f:
                argv = [a.decode('utf-8', 'replace') for a in f.read().split(b'\0') if a]
        except OSError:
            argv = list(getattr(sys, 'argv', None) or [''])
    if not argv:
        argv = ['']
    # orig_argv: [python, (-opts), -m mod | script | -c code, args...]
    prog, rest = '', []
    if os.path.basename(argv[0]).startswith('uwsgi'):  # embedded in uWSGI: its own options
        return 'uwsgi', argv[1:]
    for i, a in enumerate(argv[1:], 1):
        if a == '-m' and i + 1 < len(argv):
            prog, rest = argv[i + 1], argv[i + 2:]
            break
        if a == '-c':
            prog, rest = '-c', argv[i + 1:]  # rest[0]: the code
            break
        if not a.startswith('-'):
            prog, rest = a, argv[i + 1:]
            break
    if not prog and argv:
        prog = argv[0]
    return prog, rest


def _boot():
    if os.environ.get('SKYPROF_BOOTSTRAP_EXE') not in (None, '', sys.executable) and \
            os.path.realpath(os.environ['SKYPROF_BOOTSTRAP_EXE']) != os.path.realpath(sys.executable):
        # another interpreter (the extension is built per version): leave it alone
        return
    try:
        from skyprof import _roles, agent
    except Exception as e:
        sys.stderr.write('skyprof WARNING [pid %d] bootstrap: skyprof not importable (%r)\n'
                         % (os.getpid(), e))
        return
    try:
        prog, rest = _program()
        reason = _roles.supervisor_reason(prog, rest)
        from skyprof import instrument
        instrument.install_all()
        if reason:
            _roles.mark_supervisor(reason)
        else:
            agent.start()
    except Exception as e:
        sys.stderr.write('skyprof WARNING [pid %d] bootstrap failed: %r\n' % (os.getpid(), e))


_chain_user_sitecustomize()
if os.environ.get('SKYPROF_BOOTSTRAP', '1') != '0':
    _boot()
