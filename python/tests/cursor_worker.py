"""A worker process for test_cursor.py: one epoch of a ResumableSampler over
SIZE samples, pushing -1 at each index of its batch to a variable "count"
(SGD, learning rate 2, R = 2: each step adds 1 at every index its two
batches used).  The store's "count" is then the number of committed uses of
each sample.  Prints "round STEP" per round (the test times its kills by
them) and "done" at the end of the epoch.

Usage: cursor_worker.py ENDPOINT TASK SIZE BATCH DELAY_S"""

import sys
import time

import numpy as np

import syncrep

endpoint, task, size, bs, delay = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                   int(sys.argv[4]), float(sys.argv[5]))
with syncrep.Client(endpoint, task_index=task, timeout=30.0) as c:
    if task == 0:
        c.declare("count", np.zeros(size, np.float32))
    else:
        c.declare("count", None, dtype=np.float32, shape=(size,))
    c.ready()
    sampler = syncrep.ResumableSampler(c, size, bs, num_tasks=2, seed=7)
    while sampler.epoch < 1:
        for batch in sampler:
            g = np.zeros(size, np.float32)
            g[batch] = -1.0
            time.sleep(delay)  # the "computation": room for the kills
            c.push("count", g)
            print("round", c.local_step, flush=True)
            c.step()
    print("done", flush=True)
