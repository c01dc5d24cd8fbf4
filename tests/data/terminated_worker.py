"""A test module (written into a test's directory as text) whose test forks one worker that
makes its `multiprocessing` temporary directory (as a Gluon DataLoader's worker does when it
shares a batch), prints ``worker <dir>`` and is ended with ``terminate()`` while busy (as a
DataLoader ends them). Not collected here: its name is no test file's."""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import multiprocessing.util
import time


def work(conn: multiprocessing.connection.Connection) -> None:
    conn.send(multiprocessing.util.get_temp_dir())
    time.sleep(60)


def test_loader() -> None:
    ctx = multiprocessing.get_context("fork")
    here, there = ctx.Pipe()
    worker = ctx.Process(target=work, args=(there,), daemon=True)
    worker.start()
    print("worker", here.recv())
    worker.terminate()
    worker.join()
