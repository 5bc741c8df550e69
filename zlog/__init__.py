"""zlog: a distributed, replicated, partitioned event log."""

from zlog.errors import ErrorCode, ZlogError

__all__ = ["ErrorCode", "ZlogError"]
__version__ = "0.1.0"
