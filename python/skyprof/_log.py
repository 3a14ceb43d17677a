"""The package's logger ('skyprof'). Quiet unless SW_AGENT_LOGGING_LEVEL / config.logging_level."""
import logging

logger = logging.getLogger('skyprof')
logger.addHandler(logging.NullHandler())


def configure(level):
    if not level:
        return
    lv = getattr(logging, str(level).upper(), None)
    if not isinstance(lv, int):
        return
    logger.setLevel(lv)
    if not any(isinstance(h, logging.StreamHandler) and not isinstance(h, logging.NullHandler)
               for h in logger.handlers):
        h = logging.StreamHandler()
        h.setFormatter(logging.Formatter('%(asctime)s skyprof %(levelname)s %(message)s'))
        logger.addHandler(h)
