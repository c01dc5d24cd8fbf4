"""The code a fork server's process runs (`forkserver`, ``python -c SERVER CHANNELS``): it
imports Python, pytest, this plugin and what it preloads once, forks one server for each
channel (a request pipe and an answer pipe, its fds in the JSON list CHANNELS), and waits for
them all. Each server forks one child per request, as `forkserver.ForkServer.run` describes.
The placeholders are `forkserver`'s to fill (``str.format``)."""

from __future__ import annotations

SERVER = r"""
import gc, json, os, select, signal, sys, traceback
sys.path.insert(0, {root!r})
import pytest, pytest_mxperf.plugin
for name in filter(None, os.environ.get({preload_env!r}, {default!r}).split(",")):
    try:
        if name.strip() == "mxnet":
            from pytest_mxperf.system.mxnet_import import import_mxnet
            import_mxnet()
        else:
            __import__(name.strip())
    except Exception:
        pass  # the child imports it again and reports why it cannot
if {pin!r} is not None:  # imported elsewhere (beside another server): to the side's CPUs now
    from pytest_mxperf.system.cpus import pin_threads
    pin_threads({pin!r})
gc.freeze()  # what was imported stays out of the children's collections (pytest runs several)
CHANNELS = json.loads(sys.argv[1])  # each server's request and answer pipes

def child(req, own):
    os.setsid()
    try:  # die with the server, whatever kills it
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    for fd in own:
        os.close(fd)
    fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0); os.dup2(fd, 1); os.dup2(fd, 2)
    code = 4
    try:
        os.chdir(req["cwd"])
        sys.argv = ["pytest", *req["args"]]
        code = int(pytest.main(req["args"]))
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(code)

def serve(fd_in, fd_out):
    os.setsid()  # a group of its own: closing one server leaves its twins alone
    from pytest_mxperf.system.scratch import share_worker_tempdir
    share_worker_tempdir()  # the children's data-loader workers share it; removed as this exits
    requests, out = os.fdopen(fd_in, "rb"), os.fdopen(fd_out, "wb")

    def answer(obj):
        out.write((json.dumps(obj) + "\n").encode()); out.flush()

    answer({{"ready": os.getpid()}})
    for line in requests:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            child(req, (fd_in, fd_out))
        answer({{"pid": pid}})
        while True:
            ready, _, _ = select.select([requests], [], [], 0.05)
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                answer({{"exit": os.waitstatus_to_exitcode(status)}})
                break
            if ready and not requests.peek(1):  # the controller is gone
                try: os.killpg(pid, signal.SIGKILL)
                except OSError: pass
                os.waitpid(pid, 0)
                sys.exit(0)

# One import, one server a channel, each forked from here; this process waits for them all.
servers = []
for fd_in, fd_out in CHANNELS:
    pid = os.fork()
    if pid == 0:
        for fd in (fd for pair in CHANNELS for fd in pair if fd not in (fd_in, fd_out)):
            os.close(fd)
        try:
            serve(fd_in, fd_out)
        except BrokenPipeError:
            pass
        sys.exit(0)
    servers.append(pid)
for fd in (fd for pair in CHANNELS for fd in pair):
    os.close(fd)
for _ in servers:
    os.wait()
"""
