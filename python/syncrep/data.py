"""Exactly-once data across restarts: ``ResumableSampler`` (docs/python.md,
Exactly-once data).

Each worker reads its own shard of every epoch (a permutation of the
dataset's indices, the same on every worker for an epoch, dealt out by task
index).  Before a round's pushes the sampler sends the client its cursor
(epoch and position after the round's batch, ``Client.set_cursor``); the
coordinator commits it with the step that round's gradient goes into.  The
next batch starts where ``Client.cursor()`` says: after a round that counted,
the next samples; after one that was dropped (stale, or cut by a restart of
the coordinator), the same samples again; in a restarted worker, where its
last committed step left off.  So the samples of an epoch go into the
committed steps exactly once each, whatever was killed.

    sampler = ResumableSampler(client, len(dataset), batch_size=64, num_tasks=3)
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=sampler)  # num_workers=0
    while sampler.epoch < EPOCHS:
        for x, y in loader:
            ...; sync.step()

The loader must fetch a batch only after the previous round's ``step()``:
``num_workers=0`` (the default) does; worker processes prefetch and do not.
"""

import struct

import numpy as np

from .errors import invalid

_MAGIC = b"SRS1"
_FMT = "<4sqqqqq"  # magic, epoch, position, seed, dataset size, tasks


class ResumableSampler:
    """A batch sampler (an iterable of lists of indices) over this task's
    shard of each epoch, resuming from the client's cursor.

    ``client``: a ready ``syncrep.Client``.  ``size``: the dataset's length.
    ``num_tasks``: the workers sharing the epoch (task ``client.task_index``
    takes positions task, task + num_tasks, ...).  ``shuffle``: a new
    permutation each epoch from ``seed + epoch`` (numpy's PCG64), else the
    indices in order.  ``drop_last``: drop a last batch shorter than
    ``batch_size``."""

    def __init__(self, client, size, batch_size, num_tasks, seed=0, shuffle=True,
                 drop_last=False):
        if not isinstance(size, int) or size <= 0:
            raise invalid("ResumableSampler: size must be an int > 0, not %r" % (size,))
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise invalid("ResumableSampler: batch_size must be an int > 0, not %r" %
                          (batch_size,))
        if not isinstance(num_tasks, int) or num_tasks <= 0:
            raise invalid("ResumableSampler: num_tasks must be an int > 0, not %r" %
                          (num_tasks,))
        if client.task_index >= num_tasks:
            raise invalid("ResumableSampler: task %d is not one of %d tasks" %
                          (client.task_index, num_tasks))
        self.client = client
        self.size, self.batch_size, self.num_tasks = size, batch_size, num_tasks
        self.seed, self.shuffle, self.drop_last = int(seed), bool(shuffle), bool(drop_last)
        self.task = client.task_index
        self.last_batch = None  # the indices of the batch handed out last

    # ---- the cursor --------------------------------------------------------

    def encode(self, epoch, position):
        return struct.pack(_FMT, _MAGIC, epoch, position, self.seed, self.size, self.num_tasks)

    def decode(self, raw):
        """(epoch, position) of a cursor; (0, 0) for none."""
        if not raw:
            return 0, 0
        if len(raw) != struct.calcsize(_FMT) or raw[:4] != _MAGIC:
            raise invalid("ResumableSampler: the stored cursor (%d bytes) is not one of a "
                          "ResumableSampler" % len(raw))
        _, epoch, pos, seed, size, tasks = struct.unpack(_FMT, raw)
        if (seed, size, tasks) != (self.seed, self.size, self.num_tasks):
            raise invalid("ResumableSampler: the stored cursor is of seed %d, size %d, %d tasks; "
                          "this sampler has seed %d, size %d, %d tasks" %
                          (seed, size, tasks, self.seed, self.size, self.num_tasks))
        return epoch, pos

    def position(self):
        """(epoch, position in this task's shard) to resume from."""
        return self.decode(self.client.cursor())

    @property
    def epoch(self):
        """The epoch the next batch comes from."""
        return self.position()[0]

    # ---- the shards --------------------------------------------------------

    def shard(self, epoch):
        """This task's indices of ``epoch``, in the order they are used."""
        if self.shuffle:
            order = np.random.default_rng(self.seed + epoch).permutation(self.size)
        else:
            order = np.arange(self.size)
        return order[self.task::self.num_tasks]

    def _batches(self, n):
        full, rest = divmod(n, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __len__(self):
        """Batches in this task's shard of an epoch."""
        return self._batches(len(range(self.task, self.size, self.num_tasks)))

    def __iter__(self):
        """The batches of the epoch the cursor is in, from its position: each
        sends its cursor (``Client.set_cursor``) as it is handed out, and the
        next one starts from ``Client.cursor()``."""
        epoch, pos = self.position()
        start = epoch
        shard = self.shard(epoch)
        end = self._batches(len(shard)) * self.batch_size
        while epoch == start and pos < min(end, len(shard)):
            batch = shard[pos:pos + self.batch_size]
            nxt = pos + len(batch)
            after = (epoch, nxt) if nxt < min(end, len(shard)) else (epoch + 1, 0)
            self.client.set_cursor(self.encode(*after))
            self.last_batch = batch.tolist()
            yield self.last_batch
            epoch, pos = self.position()
