"""A scheduler or server rank that runs on MXNet's C library alone.

``import mxnet`` in a process whose ``DMLC_ROLE`` is scheduler or server creates the ``dist``
kvstore and runs ps-lite's node until the job ends (MXNet's ``kvstore_server`` module): the
Python side it loads first (over a second of CPU) serves only one thing there, a server's
controller, which unpickles the optimizer an ``update_on_kvstore`` worker sends. A scheduler
never gets one, nor does a server of a sync case (its workers sum plainly:
`pytest_mxperf.distributed.rank.servers_update`), so those take the same C calls directly.
"""

from __future__ import annotations

import ctypes
import os
import sys

from pytest_mxperf.system.mxnet_import import load_library

#: ``MXKVStoreServerController``: (command id, command body, handle) -> void.
_CONTROLLER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


class NodeError(RuntimeError):
    """A call into MXNet's C library failed; the message is MXNet's last error."""


def _check(lib: ctypes.CDLL, status: int) -> None:
    if status != 0:
        raise NodeError(lib.MXGetLastError().decode(errors="replace"))


def _unexpected(cmd_id: int, body: bytes | None, _handle: object) -> None:
    # A command for MXNet's Python controller (an optimizer to unpickle): a server started
    # without it cannot apply it, and summing on would train without the update asked for.
    print(
        f"mxperf: server started without MXNet's Python side got controller command {cmd_id} "
        f"({len(body or b'')} bytes): an optimizer for update_on_kvstore, which this case's "
        "spec said its workers do not use",
        file=sys.stderr,
        flush=True,
    )
    os._exit(1)


def run_node() -> None:
    """What ``import mxnet`` does in a scheduler or server process, on the C library alone:
    create the ``dist`` kvstore, run this node until the job ends, shut the engine down."""
    lib = load_library()
    handle = ctypes.c_void_p()
    _check(lib, lib.MXKVStoreCreate(b"dist", ctypes.byref(handle)))
    controller = _CONTROLLER(_unexpected)  # kept referenced while the node runs
    _check(lib, lib.MXKVStoreRunServer(handle, controller, None))
    _check(lib, lib.MXKVStoreFree(handle))
    _check(lib, lib.MXNotifyShutdown())  # as mxnet.base's atexit hook does
