"""A worker's place in a job, read from the environment the way schedulers
set it.

The endpoint comes from ``SYNCREP_COORDINATOR``.  The task index from
``SYNCREP_TASK_INDEX``, else torchrun's ``RANK``, else Kubeflow's
``PET_NODE_RANK``, else Slurm's ``SLURM_PROCID`` (the first one set wins).
CURVE keys, when used, from ``SYNCREP_SERVER_PUBLIC_KEY``,
``SYNCREP_PUBLIC_KEY`` and ``SYNCREP_SECRET_KEY``.
"""

import os
from collections import namedtuple

from .errors import invalid

ENDPOINT_VARS = ("SYNCREP_COORDINATOR",)
TASK_VARS = ("SYNCREP_TASK_INDEX", "RANK", "PET_NODE_RANK", "SLURM_PROCID")

Place = namedtuple("Place", "endpoint task_index source server_public_key public_key secret_key")


def place(environ=None):
    """The ``Place`` the environment gives (``environ`` defaults to
    ``os.environ``); ``syncrep.Error`` (SR_EINVAL) naming the variables
    looked at when the endpoint or the index is missing or not a number."""
    e = os.environ if environ is None else environ
    endpoint = next((e[v] for v in ENDPOINT_VARS if e.get(v)), None)
    if endpoint is None:
        raise invalid("no coordinator endpoint in the environment: set %s" %
                      " or ".join(ENDPOINT_VARS))
    source = next((v for v in TASK_VARS if e.get(v, "") != ""), None)
    if source is None:
        raise invalid("no task index in the environment: looked at %s" % ", ".join(TASK_VARS))
    try:
        task = int(e[source])
    except ValueError:
        raise invalid("%s=%r is not a task index (an integer >= 0)" % (source, e[source])) from None
    if task < 0:
        raise invalid("%s=%d is not a task index (an integer >= 0)" % (source, task))
    return Place(endpoint, task, source, e.get("SYNCREP_SERVER_PUBLIC_KEY") or None,
                 e.get("SYNCREP_PUBLIC_KEY") or None, e.get("SYNCREP_SECRET_KEY") or None)
