"""Loads the C extension. The package stays importable without it (every call is then a no-op
and dump_stack raises), so a broken build never breaks the host application's imports."""
from ._log import logger

try:
    from . import _skyprof as native  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the build
    native = None
    logger.warning('skyprof: native extension unavailable (%s); agent disabled', e)

HAS_AGENT = bool(native is not None and native.has_agent())
