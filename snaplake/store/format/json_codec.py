"""orjson helpers shared by every JSON metadata file (snapshots, schemas, hints, tags).

Bytes in, bytes out; output is deterministic (sorted keys are NOT used: Paimon
readers do not care about key order and keeping the declared order makes the
files read like Paimon's own). Decode errors become ``CorruptMetadataError``
naming the path.
"""

from __future__ import annotations

from typing import Any

import orjson

from snaplake.errors import CorruptMetadataError

__all__ = ["decode_json", "encode_json"]


def encode_json(value: Any, *, indent: bool = True) -> bytes:
    """Serialise ``value`` (dicts, lists, str, int, float, bool, None) to UTF-8 JSON bytes.

    Args:
        value: The JSON-compatible value.
        indent: Pretty-print with 2 spaces, as Paimon's own writer does.
    """
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else 0)


def decode_json(data: bytes, *, path: str) -> Any:
    """Parse JSON ``data`` read from ``path``.

    Raises:
        CorruptMetadataError: ``data`` is empty, truncated or not JSON.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CorruptMetadataError(
            f"{path} is not valid JSON ({exc}); the file is corrupt or truncated — restore it "
            "from a backup or roll the table back to an earlier snapshot",
            path=path,
        ) from exc
