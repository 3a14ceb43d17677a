"""skyprof - on-demand, trace-aware profiling for Python, speaking SkyWalking's v3 protocol.

    from skyprof import agent, config
    config.service_name = 'provider'
    agent.start()

or run an unchanged application with ``python -m skyprof run app.py [args]``.
"""
from . import config  # noqa: F401
from . import agent  # noqa: F401
from ._tracer import entry, entry_point, sw8_inject, current_trace_id  # noqa: F401
from . import _native

__version__ = '0.1.0'


if _native.native is not None:
    # The C function itself, so no wrapper frame of ours shows up in the caller's stack.
    dump_stack = _native.native.dump_stack
    """dump_stack(thread_id=None, max_depth=500) -> list[str]: frames of a thread of this process
    (default: the calling thread), root first, each ``"<filename>.<function>: <line>"``, exactly
    as the profiler's sampler captures them."""
else:  # pragma: no cover
    def dump_stack(thread_id=None, max_depth=500):
        raise RuntimeError('skyprof native extension unavailable')


__all__ = ['agent', 'config', 'entry', 'entry_point', 'dump_stack', 'sw8_inject',
           'current_trace_id']
