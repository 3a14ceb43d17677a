"""Agent lifecycle: ``agent.start()`` / ``agent.stop()`` (the shape of SkyWalking's Python agent).

start() never raises into the application: a failure is logged and the application runs
without the agent. The agent runs in C threads (libskyprof); no Python thread is added. It is
stopped at interpreter exit (atexit) and restarted in fork()ed children (new instance name, new
connection) so gunicorn-style workers each report as their own instance.
"""
import atexit
import os
import threading

from . import _native, config
from ._log import configure as _configure_log, logger

_lock = threading.Lock()
_state = {'started': False, 'atexit': False, 'atfork': False, 'pid': None}


def _after_fork_in_child():
    # Runs in the child right after fork (os.register_at_fork). The C side already re-aimed its
    # memory reader at the child's pid (pthread_atfork); here the agent is restarted.
    try:
        if _state['started'] and _native.native is not None:
            ok = _native.native.after_fork_child()
            _state['pid'] = os.getpid()
            if not ok:
                logger.warning('skyprof: agent not restarted in forked child %d', os.getpid())
    except Exception as e:  # never into user code
        logger.error('skyprof: fork handling failed: %r', e)


def start(**overrides):
    """Starts the agent with ``config`` (plus keyword overrides of config attributes).
    Returns True when running. Idempotent."""
    with _lock:
        if _state['started']:
            return True
        try:
            if overrides:
                config.init(**overrides)
            _configure_log(config.effective('agent_logging_level'))
            if not _native.HAS_AGENT:
                logger.warning('skyprof: built without libskyprof; agent not started')
                return False
            from . import instrument  # hooks installed before the native start
            instrument.install_all()
            kwargs = config.start_kwargs()
            _native.native.start(**kwargs)
            try:
                _state['started'] = True
                _state['pid'] = os.getpid()
                if not _state['atexit']:
                    atexit.register(stop)
                    _state['atexit'] = True
                if not _state['atfork'] and hasattr(os, 'register_at_fork'):
                    os.register_at_fork(after_in_child=_after_fork_in_child)
                    _state['atfork'] = True
            except BaseException:
                _state['started'] = False
                _native.native.stop(flush_ms=0)
                raise
            logger.info('skyprof: agent started (service=%s backend=%s instance=%s)',
                        kwargs['service'], kwargs['backend'], _native.native.instance())
            return True
        except Exception as e:
            logger.error('skyprof: agent not started: %r', e)
            return False


def stop(flush_ms=2000):
    """Stops the agent, flushing queued data for at most flush_ms. Safe to call twice."""
    with _lock:
        if not _state['started']:
            return
        _state['started'] = False
        try:
            _native.native.stop(flush_ms=flush_ms)
        except Exception as e:
            logger.error('skyprof: stop failed: %r', e)


def started():
    return _state['started']


def stats():
    """Counters of the running agent (dict) or None."""
    if not _state['started']:
        return None
    try:
        return _native.native.stats()
    except Exception:
        return None


def add_task(endpoint, duration_min=1, min_duration_threshold_ms=0, dump_period_ms=10,
             max_sampling_count=5, task_id=None):
    """Adds a local profile task (as if created on the backend). Raises ValueError if rejected."""
    if not _state['started']:
        raise RuntimeError('skyprof agent not started')
    _native.native.add_task(endpoint, duration_min, min_duration_threshold_ms, dump_period_ms,
                            max_sampling_count, task_id)
