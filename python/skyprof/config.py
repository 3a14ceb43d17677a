"""skyprof agent configuration.

Module attributes, read from the environment at import time using the variable names of
SkyWalking's Python agent, then overridable in code before ``agent.start()``::

    from skyprof import agent, config
    config.service_name = 'provider'     # or config.agent_name (SkyWalking >= 1.0 spelling)
    agent.start()

Both spellings of SkyWalking's Python agent are accepted: the 0.x names used by the seed example
(``service_name``, ``collector_address``, ``logging_level`` ...) and the 1.x names
(``agent_name``, ``agent_collector_backend_services``, ``agent_logging_level`` ...). When both are
changed, the 1.x name wins.
"""
import os as _os


def _env_str(name, default):
    v = _os.environ.get(name)
    return v if v not in (None, '') else default


def _env_int(name, default):
    v = _os.environ.get(name)
    if v in (None, ''):
        return default
    try:
        return int(v)
    except ValueError:
        return default


def _env_bool(name, default):
    v = _os.environ.get(name)
    if v in (None, ''):
        return default
    return v.strip().lower() not in ('false', '0', 'no', 'off')


# --- SkyWalking 1.x names (SW_AGENT_*) -------------------------------------------------------
agent_name = _env_str('SW_AGENT_NAME', 'Python Service Name')
agent_instance_name = _env_str('SW_AGENT_INSTANCE_NAME', '')
agent_collector_backend_services = _env_str('SW_AGENT_COLLECTOR_BACKEND_SERVICES', '127.0.0.1:11800')
agent_authentication = _env_str('SW_AGENT_AUTHENTICATION', '')
agent_profile_active = _env_bool('SW_AGENT_PROFILE_ACTIVE', True)
agent_profile_max_parallel = _env_int('SW_AGENT_PROFILE_MAX_PARALLEL', 5)
agent_profile_dump_max_stack_depth = _env_int('SW_AGENT_PROFILE_DUMP_MAX_STACK_DEPTH', 500)
agent_profile_snapshot_transport_buffer_size = _env_int('SW_AGENT_PROFILE_SNAPSHOT_TRANSPORT_BUFFER_SIZE', 4500)
agent_collector_get_profile_task_interval = _env_int('SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL', 20)
agent_collector_heartbeat_period = _env_int('SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD', 30)
agent_logging_level = _env_str('SW_AGENT_LOGGING_LEVEL', None)

# --- skyprof extras ----------------------------------------------------------------------------
# Start a fresh agent (new instance name, new connection) in fork()ed children (gunicorn workers).
restart_in_child = _env_bool('SKYPROF_RESTART_IN_CHILD', True)
# Report finished segments (traces) as well as profiling snapshots.
report_segments = _env_bool('SKYPROF_REPORT_SEGMENTS', True)
# Use the GIL-taking portable stack reader even when a direct one exists (debugging).
python_portable_reader = _env_bool('SKYPROF_PYTHON_PORTABLE', False)
# Lowest accepted dump period in ms (SkyWalking: 10; lower only for benchmarks).
min_dump_period_ms = _env_int('SKYPROF_MIN_DUMP_PERIOD_MS', 10)
# Patch http.server at start (SkyWalking's http.server plugin).
instrument_http_server = _env_bool('SKYPROF_INSTRUMENT_HTTP_SERVER', True)

# --- SkyWalking 0.x names (the seed example uses these) ---------------------------------------
service_name = agent_name
service_instance = agent_instance_name
collector_address = agent_collector_backend_services
authentication = agent_authentication
profile_active = agent_profile_active
profile_max_parallel = agent_profile_max_parallel
profile_dump_max_stack_depth = agent_profile_dump_max_stack_depth
profile_snapshot_transport_buffer_size = agent_profile_snapshot_transport_buffer_size
get_profile_task_interval = agent_collector_get_profile_task_interval
heartbeat_period = agent_collector_heartbeat_period
logging_level = agent_logging_level

# (1.x name, 0.x name) pairs.
_ALIASES = (
    ('agent_name', 'service_name'),
    ('agent_instance_name', 'service_instance'),
    ('agent_collector_backend_services', 'collector_address'),
    ('agent_authentication', 'authentication'),
    ('agent_profile_active', 'profile_active'),
    ('agent_profile_max_parallel', 'profile_max_parallel'),
    ('agent_profile_dump_max_stack_depth', 'profile_dump_max_stack_depth'),
    ('agent_profile_snapshot_transport_buffer_size', 'profile_snapshot_transport_buffer_size'),
    ('agent_collector_get_profile_task_interval', 'get_profile_task_interval'),
    ('agent_collector_heartbeat_period', 'heartbeat_period'),
    ('agent_logging_level', 'logging_level'),
)
_initial = {new: globals()[new] for new, _ in _ALIASES}


def init(**kwargs):
    """Sets configuration attributes by name (either spelling), like SkyWalking's config.init."""
    g = globals()
    for k, v in kwargs.items():
        if k not in g or k.startswith('_'):
            raise KeyError('unknown skyprof config option: %s' % k)
        g[k] = v


def effective(name):
    """The value in force for a 1.x option name, honouring its 0.x alias."""
    g = globals()
    new_val = g[name]
    old = dict(_ALIASES).get(name)
    if old is None:
        return new_val
    if new_val != _initial[name]:
        return new_val
    return g[old]


def instance_properties():
    """The instance properties SkyWalking's Python agent reports (language, OS Name, hostname,
    ipv4, python_implementation, python_version, namespace, SW_AGENT_INSTANCE_PROPERTIES_JSON);
    "Process No." is added by the C core at each report (so it is right after fork)."""
    import platform
    import socket
    props = [('language', 'python'), ('OS Name', _os.name)]
    try:
        host = socket.gethostname()
        props.append(('hostname', host))
        try:
            props.append(('ipv4', '; '.join(socket.gethostbyname_ex(host)[2])))
        except OSError:
            pass
    except OSError:
        pass
    props.append(('python_implementation', platform.python_implementation()))
    props.append(('python_version', platform.python_version()))
    ns = _os.environ.get('SW_AGENT_NAMESPACE')
    if ns:
        props.append(('namespace', ns))
    extra = _os.environ.get('SW_AGENT_INSTANCE_PROPERTIES_JSON')
    if extra:
        try:
            import json
            for k, v in json.loads(extra).items():
                props.append((str(k), str(v)))
        except Exception:
            pass
    return props[:32]


def start_kwargs():
    """Keyword arguments for skyprof._skyprof.start() built from the effective configuration."""
    # The whole comma list: the C core connects to one collector and fails over to the next.
    backend = ','.join(t.strip() for t in str(effective('agent_collector_backend_services') or '').split(','))
    level = effective('agent_logging_level')
    return dict(
        service=str(effective('agent_name')),
        instance=_instance_name(),
        backend=backend,
        authentication=str(effective('agent_authentication') or ''),
        poll_interval_ms=int(effective('agent_collector_get_profile_task_interval')) * 1000,
        heartbeat_period_ms=int(effective('agent_collector_heartbeat_period')) * 1000,
        max_parallel=int(effective('agent_profile_max_parallel')),
        max_stack_depth=int(effective('agent_profile_dump_max_stack_depth')),
        snapshot_buffer_size=int(effective('agent_profile_snapshot_transport_buffer_size')),
        profile_active=bool(effective('agent_profile_active')),
        log_level=str(level) if level else None,
        restart_in_child=bool(restart_in_child),
        min_dump_period_ms=int(min_dump_period_ms),
        report_segments=bool(report_segments),
        portable=bool(python_portable_reader),
        language='python',
        properties=instance_properties(),
    )


def _instance_name():
    from . import _roles
    return _roles.instance_name_for_process(str(effective('agent_instance_name') or ''))
