"""A query stopped while `foreachBatch(ZlogSink(...))` writes: hand Spark an error it recognises.

`query.stop()` cancels the stream's jobs and interrupts its thread. With PySpark's pinned
threads the foreachBatch function runs its Spark job on that very thread, so the sink's job
fails with a Py4JJavaError around java.lang.InterruptedException (or around the SparkException
of the cancelled job group). The error returns to the JVM as the text of its Python traceback,
and Spark tells a stop from a failure by matching that text with a regular expression
(`StreamExecution.isInterruptionException`) whose `(.|\\r\\n|\\r|\\n)*` recurses once per
character after "Py4JJavaError: An error occurred while calling". The Java stack trace in the
text (about 10 KB) overflows the stream thread's stack: the thread dies with a
StackOverflowError, Spark records no error, and its status never reaches "Stopped".

So such an error leaves the sink without its Java stack frames: Spark then reads one line such
as `An error occurred while calling o156.collectToPython.\\n: java.lang.InterruptedException`,
the form it matches, and the query stops cleanly. The batch being written is not committed;
the query's next run replays it from the checkpoint (at-least-once). Any other error keeps its
stack trace: it is a failure, and Spark reports it as one without matching anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from py4j.java_gateway import is_instance_of
from py4j.protocol import Py4JJavaError
from pyspark import SparkContext

INTERRUPTIONS: Final = (
    "java.lang.InterruptedException",
    "java.io.InterruptedIOException",
    "java.nio.channels.ClosedByInterruptException",
)
"""What Spark's stop check looks for in the text (StreamExecution.IO_EXCEPTION_NAMES)."""

SPARK_EXCEPTION: Final = "org.apache.spark.SparkException"
CAUSES_MAX: Final = 16  # a bound on walking getCause(), which a bad exception could make cyclic


@contextmanager
def stop_recognisable_by_spark() -> Iterator[None]:
    """Around a foreachBatch function's Spark actions: a stop's error leaves it short."""
    try:
        yield
    except Py4JJavaError as error:
        gateway = SparkContext._gateway
        chain = _causes(error.java_exception)
        if gateway is not None and any(_stopping(gateway, throwable) for throwable in chain):
            no_frames = gateway.new_array(gateway.jvm.java.lang.StackTraceElement, 0)
            for throwable in chain:
                throwable.setStackTrace(no_frames)
        raise


def _causes(throwable: Any) -> list[Any]:
    """`throwable` and its causes, outermost first."""
    chain: list[Any] = []
    while throwable is not None and len(chain) < CAUSES_MAX:
        chain.append(throwable)
        throwable = throwable.getCause()
    return chain


def _stopping(gateway: Any, throwable: Any) -> bool:
    """Whether `throwable` is how a stop reaches a job: an interrupt, or the cancelled job."""
    if any(is_instance_of(gateway, throwable, name) for name in INTERRUPTIONS):
        return True
    return bool(is_instance_of(gateway, throwable, SPARK_EXCEPTION)
                and "cancelled" in str(throwable.getMessage() or ""))
