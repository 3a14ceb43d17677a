"""Which processes get an agent under ``python -m skyprof run``.

Every Python process started below ``run`` (reloader children, multiprocessing spawn workers,
uvicorn --workers, gunicorn and uWSGI workers) runs the bootstrap (skyprof/bootstrap/
sitecustomize.py) and starts its own agent. A process that only supervises others - the
reloader parent of ``flask --debug run`` and Django's ``runserver``, the gunicorn master, the
uvicorn supervisor of ``--workers N``/``--reload`` - starts none, so it never registers an
instance or logs NOTIFIED for requests it will never serve; its fork()ed workers start theirs.
A fixed SW_AGENT_INSTANCE_NAME gets the suffix ``-<pid>`` in every process but the one ``run``
started (so workers never merge into one instance)."""
import os
import sys

ROOT_PID_ENV = 'SKYPROF_RUN_ROOT_PID'

_state = {'supervisor': None, 'atfork': False}


def _flag(argv, *names):
    return any(a in names or any(a.startswith(n + '=') for n in names) for a in argv)


def _int_opt(argv, name):
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            try:
                return int(argv[i + 1])
            except ValueError:
                return None
        if a.startswith(name + '='):
            try:
                return int(a.split('=', 1)[1])
            except ValueError:
                return None
    return None


def supervisor_reason(program, argv, environ=os.environ):
    """Why the process about to run `program` (script path or module name) with `argv` is a
    supervisor that serves no request, or None."""
    if program == '-c':
        code = argv[0] if argv else ''
        if 'resource_tracker' in code or 'semaphore_tracker' in code or 'forkserver' in code:
            return 'multiprocessing helper'  # serves nothing: no agent
        return None
    prog = os.path.basename(program or '')
    if prog.endswith('.py'):
        prog = prog[:-3]
    if prog in ('gunicorn', 'gunicorn.__main__'):
        return 'gunicorn master'
    if prog in ('uvicorn', 'uvicorn.__main__'):
        workers = _int_opt(argv, '--workers')
        if workers is None:
            try:
                workers = int(environ.get('WEB_CONCURRENCY', '1'))
            except ValueError:
                workers = 1
        if workers > 1 or _flag(argv, '--reload'):
            return 'uvicorn supervisor'
        return None
    if prog in ('flask', 'flask.__main__'):
        if 'run' not in argv or environ.get('WERKZEUG_RUN_MAIN') == 'true':
            return None
        debug = _flag(argv, '--debug') or environ.get('FLASK_DEBUG', '').lower() in ('1', 'true')
        reload = _flag(argv, '--reload') or (debug and not _flag(argv, '--no-reload'))
        return 'werkzeug reloader' if reload else None
    if prog in ('manage', 'django-admin', 'django'):
        if 'runserver' not in argv or _flag(argv, '--noreload'):
            return None
        if environ.get('RUN_MAIN') == 'true':  # django.utils.autoreload.DJANGO_AUTORELOAD_ENV
            return None
        return 'django autoreloader'
    if prog == 'uwsgi':
        # with --master the first process only supervises and forks the workers (the app is
        # loaded before the fork unless --lazy-apps); without it, it is worker 1 itself
        if _flag(argv, '--master', '-M') or environ.get('UWSGI_MASTER', '').lower() in ('1', 'true'):
            return 'uWSGI master'
    return None


def _start_in_child():
    if _state['supervisor'] is None:
        return
    _state['supervisor'] = None
    from . import agent
    agent.start()


def mark_supervisor(reason):
    """The process will only supervise: no agent here; fork()ed children start their own."""
    _state['supervisor'] = reason
    if not _state['atfork'] and hasattr(os, 'register_at_fork'):
        os.register_at_fork(after_in_child=_start_in_child)
        _state['atfork'] = True
    if reason == 'uWSGI master':
        # uWSGI forks its workers without Python's fork hooks; its own post-fork hook is an
        # attribute of the `uwsgi` module, which exists only once the app starts loading
        from ._postimport import on_next_imports

        def hook_uwsgi():
            mod = sys.modules.get('uwsgi')
            if mod is None:
                return False
            prev = getattr(mod, 'post_fork_hook', None)

            def post_fork():
                _start_in_child()
                if prev is not None:
                    prev()
            mod.post_fork_hook = post_fork
            return True
        on_next_imports(hook_uwsgi)
    from ._log import logger
    logger.info('skyprof: %s (pid %d) supervises: no agent in it, one in each worker',
                reason, os.getpid())


def became_supervisor(reason):
    """Called when a running process turns into a supervisor (e.g. a reloader parent): its agent
    stops (it will serve no request) and forked children start their own."""
    from . import agent
    if agent.started():
        agent.stop(flush_ms=0)
    mark_supervisor(reason)


def is_supervisor():
    return _state['supervisor'] is not None


def instance_name_for_process(name):
    """A fixed instance name in a process `run` did not start directly gets ``-<pid>``."""
    root = os.environ.get(ROOT_PID_ENV)
    if name and root and root != str(os.getpid()):
        return '%s-%d' % (name, os.getpid())
    return name
