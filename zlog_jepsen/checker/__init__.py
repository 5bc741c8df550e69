"""The checker: a history and the final full read in, a count and examples per anomaly out.

One module per concern: `ops` pairs invocations with completions, `derived` builds the
per-key version orders every check reads, the anomaly modules each find one family, and
`verdict` says which anomalies make a run invalid under which producer settings.
"""

from zlog_jepsen.checker.anomaly import Anomaly
from zlog_jepsen.checker.check import CheckResult, check
from zlog_jepsen.checker.verdict import CheckConfig

__all__ = ["Anomaly", "CheckConfig", "CheckResult", "check"]
