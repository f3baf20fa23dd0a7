"""Generation on other ranks' replicas: rank 0 sends requests, each worker answers from its copy.

Every rank holds a plain copy of the model (a generation engine) next to its FSDP shard. Rank 0
receives all HTTP traffic and spreads the requests over the replicas, its own included, by the
fewest requests in flight. A worker's `ReplicaServer` takes requests over a
`multiprocessing.connection` socket (HMAC-authenticated with a key rank 0 broadcasts at boot;
loopback on one host) and answers each one as its own engine finishes it.

Messages (pickled): rank 0 -> worker `(request_id, prompt_ids, SamplingParams)`;
worker -> rank 0 `(request_id, Generation | None, Exception | None)`.
"""

from __future__ import annotations

import itertools
import logging
import socket
import threading
from concurrent.futures import Future
from multiprocessing.connection import Client, Listener
from typing import Any

from vibe_rl.errors import EngineError

log = logging.getLogger(__name__)


class ReplicaServer:
    """Worker side: serves rank 0's generation requests from the local engine."""

    def __init__(self, engine: Any, host: str, authkey: bytes):
        self.engine = engine
        self.listener = Listener((host, 0), authkey=authkey)
        self.address = self.listener.address
        self._conns: list[Any] = []
        self._closed = False
        self._conns_lock = threading.Lock()  # close() and a connection being accepted never interleave
        threading.Thread(target=self._accept, name="vibe-rl-replica-accept", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn = self.listener.accept()
            except (OSError, EOFError):
                return
            except Exception:  # a failed handshake (wrong key): keep listening
                log.warning("refused a replica connection that failed authentication")
                continue
            with self._conns_lock:
                if self._closed:  # accepted while close() ran: this connection must go away too
                    _hang_up(conn)
                    return
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), name="vibe-rl-replica", daemon=True).start()

    def _serve(self, conn: Any) -> None:
        send_lock = threading.Lock()

        def reply(rid: int, gen: Any, err: BaseException | None) -> None:
            with send_lock:
                try:
                    conn.send((rid, gen, err))
                except (OSError, EOFError):
                    pass
                except Exception:  # an error that does not pickle: send its text instead
                    conn.send((rid, None, EngineError(f"{type(err).__name__}: {err}")))

        while True:
            try:
                rid, prompt_ids, sampling = conn.recv()
            except (OSError, EOFError, TypeError):  # TypeError: close() nulled the handle mid-read
                return
            try:
                fut = self.engine.submit(prompt_ids, sampling)
            except Exception as exc:  # validation errors go back to the caller as they are
                reply(rid, None, exc)
                continue
            fut.add_done_callback(lambda f, rid=rid: reply(rid, None if f.exception() else f.result(), f.exception()))

    def close(self) -> None:
        with self._conns_lock:
            self._closed = True
            conns, self._conns = self._conns, []
        self.listener.close()
        for conn in conns:
            _hang_up(conn)


def _hang_up(conn: Any) -> None:
    """Shut a connection's socket down, then close it. A bare close() neither wakes a thread blocked in
    recv() on it nor sends the peer its end of stream while that thread holds the socket, so rank 0
    would wait for answers that never come; shutdown() does both at once."""
    try:
        sock = socket.socket(fileno=conn.fileno())  # the same socket, not a copy: shut it down, then detach
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.detach()
    except OSError:
        pass
    conn.close()


class RemoteReplica:
    """Rank 0 side: one worker's replica, as a `submit(prompt_ids, sampling) -> Future` object."""

    def __init__(self, address: Any, authkey: bytes, rank: int):
        self.rank = rank
        self.conn = Client(address, authkey=authkey)
        self._pending: dict[int, Future] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._broken: str | None = None
        threading.Thread(target=self._read, name=f"vibe-rl-remote-{rank}", daemon=True).start()

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def submit(self, prompt_ids: list[int], sampling: Any) -> Future:
        fut: Future = Future()
        if self._broken:
            fut.set_exception(EngineError(self._broken))
            return fut
        with self._lock:
            rid = next(self._ids)
            self._pending[rid] = fut
            try:
                self.conn.send((rid, list(prompt_ids), sampling))
            except (OSError, EOFError) as exc:
                self._pending.pop(rid, None)
                fut.set_exception(EngineError(f"The replica on rank {self.rank} is unreachable: {exc}"))
        return fut

    def _read(self) -> None:
        while True:
            try:
                rid, gen, err = self.conn.recv()
            except Exception as exc:  # closed, or a reply that does not unpickle: fail what waits, never hang
                self._fail_all(f"The replica on rank {self.rank} went away ({type(exc).__name__}); "
                               "see that rank's log.")
                return
            fut = self._pending.pop(rid, None)
            if fut is None or not fut.set_running_or_notify_cancel():
                continue
            if err is not None:
                fut.set_exception(err)
            else:
                fut.set_result(gen)

    def _fail_all(self, message: str) -> None:
        self._broken = message
        with self._lock:
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            if fut.set_running_or_notify_cancel():
                fut.set_exception(EngineError(message))

    def close(self) -> None:
        self._broken = self._broken or "The engine was closed."
        try:
            self.conn.close()
        except OSError:
            pass
