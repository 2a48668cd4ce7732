"""Paimon table options: one registry of declarations, and the typed view of a table's options.

* :mod:`snaplake.options.config_option`: :class:`ConfigOption` (one option),
  :class:`OptionStatus`, the one :class:`Operation` vocabulary, Paimon's value
  syntax (``parse_duration``, ``parse_memory_size``);
* :mod:`snaplake.options.registry`: every Paimon option declared once, with
  its support status and, for those snaplake reads, parser and default;
* :mod:`snaplake.options.core_options`: :class:`CoreOptions`, the typed
  accessors.

Source: Paimon ``CoreOptions`` / ``ConfigOption``.
"""

from snaplake.options.config_option import (
    ConfigOption,
    Operation,
    OptionStatus,
    parse_duration,
    parse_memory_size,
)
from snaplake.options.core_options import CoreOptions

__all__ = [
    "ConfigOption",
    "CoreOptions",
    "Operation",
    "OptionStatus",
    "parse_duration",
    "parse_memory_size",
]
