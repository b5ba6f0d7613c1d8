# Installed by blackwell.serving.sglang_service; Python imports it at start (the unit puts its directory on
# PYTHONPATH). sglang logs its whole ServerArgs at INFO when it starts (srt/entrypoints/engine.py in 0.5.9:
# logger.info(f"{server_args=}")), api_key and admin_api_key included, and the unit's output goes to the journal,
# which other users may read. Every log record made in this process and in the processes it spawns passes through
# here first, whatever handlers sglang installs later, and loses the keys' values.
import logging
import re

# the value as repr() writes a str: quoted with ' or ", a quote of the same kind and a backslash escaped inside
_KEYS = re.compile(r"""\b((?:admin_)?api_key=)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
_make_record = logging.getLogRecordFactory()


def _redacted_record(*args, **kwargs):
    record = _make_record(*args, **kwargs)
    try:
        text = record.getMessage()
    except Exception:  # a record whose arguments do not fit its message: leave it to the handler
        return record
    if "api_key=" in text:
        record.msg, record.args = _KEYS.sub(r"\1'<redacted>'", text), None
    return record


logging.setLogRecordFactory(_redacted_record)
