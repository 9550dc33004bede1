"""Where Spark comes from: one session for counting the table and for making the rows.

Neither reads anything: counting on Spark (:mod:`privsyn_core.measuring.counters.spark_counter`) and
generating on Spark (:mod:`privsyn_core.generation.spark_blocks`) both ask here.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from privsyn_core.cores import available_cores

#: the master a session is started with when none is given: local mode on every core this
#: process may use (:func:`privsyn_core.cores.available_cores`, its affinity, not the host's
#: count)
DEFAULT_MASTER = f"local[{available_cores()}]"


def spark_session(master: str | None = None) -> Any:
    """A Spark session (the running one if there is one), quiet and without its web UI.

    Without ``master``, a driver that spark-submit launched keeps spark-submit's ``--master``
    (and its other settings); otherwise :data:`DEFAULT_MASTER`.
    In local mode the Python workers that count run this process's interpreter (unless
    ``PYSPARK_PYTHON`` says otherwise): Spark's default, the first ``python3`` on the path, may
    lack NumPy and PyArrow. On a cluster the executors' Python is the cluster's to set."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("privsyn").config("spark.ui.enabled", "false")
    builder = builder.config("spark.sql.shuffle.partitions", "8")
    # no progress bar of Spark's own on the terminal: the command line draws its own
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    if master is None and os.environ.get("PYSPARK_GATEWAY_PORT"):
        return builder.getOrCreate()  # launched by spark-submit: its --master applies
    master = master or DEFAULT_MASTER
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # read when the context starts
    return builder.master(master).getOrCreate()
