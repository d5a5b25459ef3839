"""Scheduled work: the jobs the ``cron`` tool makes, heartbeats, and the ticker that fires them.

A due occurrence enters the durable inbox like a message, under the key (job id, scheduled
time): whichever process fires it first stores it, the others find the key taken. From there
the normal pipeline runs it (typing, NO_REPLY, chunking, replay after a crash). See
docs/scheduling.md.
"""
