"""Known MXNet failures of a launched rank that say nothing about a model's speed."""

from __future__ import annotations

#: MXNet 1.9.1's dist_sync start-up race: the Trainer initializes its parameters one
#: ``kv.broadcast`` at a time (init by rank 0, one worker barrier, pull), and now and then a
#: pull or pushpull reaches the server before rank 0's init of that key; the server (or the
#: worker, on an empty reply) aborts. Seen here in about 1 of 4 two-worker launches of
#: mobilenet0.25; apache/mxnet#7893 reports the same. It says nothing about the model's speed,
#: so such a launch is started again once and the retry is recorded with the result.
KNOWN_RACES = (
    (
        "Check failed: !stored.is_none()",
        "MXNet's dist_sync init race (server: key pulled before init)",
    ),
    ("kv_app.h:624", "MXNet's dist_sync init race (worker: empty reply for a key not yet init)"),
)


def known_race(tail: str) -> str | None:
    """What a rank's output tail shows of `KNOWN_RACES`, or None."""
    for needle, what in KNOWN_RACES:
        if needle in tail:
            return what
    return None
