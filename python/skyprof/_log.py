"""The package's logger ('skyprof'), created on first use: importing `logging` costs about
0.5 MB in hosts that do not use it. Quiet unless SW_AGENT_LOGGING_LEVEL / config.logging_level."""


class _LazyLogger:
    __slots__ = ('_logger',)

    def __init__(self):
        self._logger = None

    def _get(self):
        if self._logger is None:
            import logging
            lg = logging.getLogger('skyprof')
            if not lg.handlers:
                lg.addHandler(logging.NullHandler())
            self._logger = lg
        return self._logger

    def __getattr__(self, name):
        if self._logger is None and name in ('debug', 'info'):
            return _quiet  # nobody configured logging: do not import it for chatter
        return getattr(self._get(), name)


def _quiet(*args, **kwargs):
    return None


logger = _LazyLogger()


def configure(level):
    if not level:
        return
    import logging
    lv = getattr(logging, str(level).upper(), None)
    if not isinstance(lv, int):
        return
    lg = logger._get()
    lg.setLevel(lv)
    if not any(type(h) is logging.StreamHandler for h in lg.handlers):
        h = logging.StreamHandler()
        h.setFormatter(logging.Formatter('%(asctime)s skyprof %(levelname)s %(message)s'))
        lg.addHandler(h)


_warned = set()


def warn_once(key, message):
    """Logs `message` at WARNING once per process and key. When the application configured no
    level for skyprof, the line goes to stderr anyway: these are the "nothing will be traced"
    cases a user must not miss."""
    if key in _warned:
        return
    _warned.add(key)
    try:
        lg = logger._get()
        if lg.level and lg.level <= 30 and any(type(h).__name__ != 'NullHandler'
                                               for h in lg.handlers):
            lg.warning(message)
            return
        import os
        import sys
        sys.stderr.write('skyprof WARNING [pid %d] %s\n' % (os.getpid(), message))
        sys.stderr.flush()
    except Exception:
        pass
