"""A loopback TCP proxy in front of kube-apiserver that can cut every connection or slow replies.

Every client of the chaos cluster (the two replicas, the webhook's workers, kube-scheduler)
reaches kube-apiserver through it; TLS passes through untouched (the serving certificate
names 127.0.0.1, so clients verify it as before). Two faults come from here:

* :meth:`FaultProxy.cut` resets every open connection (SO_LINGER 0, so both ends see a
  reset, as when a load balancer or a node's conntrack drops them): every watch ends at
  once, and every client must reconnect and resume;
* :meth:`FaultProxy.slow` holds each chunk of the server's replies for a while before
  passing it on: a slow API server as the clients see it (lists, watches, binds and lease
  renewals all wait);
* :meth:`FaultProxy.blackhole` keeps every open connection open but passes nothing more
  on either way, as a NAT or conntrack entry dropped without a reset: a client notices
  only by a timeout of its own (new connections work).

One thread accepts; each connection has two pump threads (one per direction). A handful
of clients keep a few connections each, so threads are cheap enough here.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time

BUFFER = 65536


def _reset(sock: socket.socket) -> None:
    """Close with a TCP reset rather than a FIN.

    close() alone does not do it while a pump thread is blocked in recv() on the socket:
    the kernel keeps the connection until that call returns, and the peer sees a silent,
    open connection (a black hole, not a cut). shutdown(SHUT_RD) wakes the reader without
    sending anything; the last reference then goes with SO_LINGER 0: a reset."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)
    with contextlib.suppress(OSError):
        sock.close()


class FaultProxy:
    """Forward 127.0.0.1:<port> to ``upstream`` (host, port) until :meth:`stop`."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.delay = 0.0  # seconds each server-to-client chunk is held
        self.cuts = 0
        self._lock = threading.Lock()
        self._pairs: set[tuple[socket.socket, socket.socket]] = set()
        self._swallowed: set[tuple[socket.socket, socket.socket]] = set()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port: int = self._listener.getsockname()[1]
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="chaos-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._pairs)

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        self.cut()

    def cut(self) -> int:
        """Reset every open connection; returns how many were cut."""
        with self._lock:
            pairs = list(self._pairs)
            self._pairs.clear()
        for client, server in pairs:
            _reset(client)
            _reset(server)
        self.cuts += len(pairs)
        return len(pairs)

    def blackhole(self) -> int:
        """Stop passing anything on the open connections, without closing them; returns how many."""
        with self._lock:
            self._swallowed |= self._pairs
            return len(self._pairs)

    def slow(self, delay: float) -> None:
        """Hold each chunk of every reply ``delay`` seconds from now on (0: no delay)."""
        self.delay = max(0.0, delay)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._open, args=(client,), name="chaos-proxy-open", daemon=True).start()

    def _open(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self.upstream, timeout=5)
        except OSError:  # kube-apiserver is down: the client sees its connection reset
            _reset(client)
            return
        server.settimeout(None)
        for sock in (client, server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pair = (client, server)
        with self._lock:
            self._pairs.add(pair)
        threading.Thread(target=self._pump, args=(client, server, pair, False), daemon=True).start()
        self._pump(server, client, pair, True)

    def _pump(self, source: socket.socket, target: socket.socket, pair: tuple[socket.socket, socket.socket],
              reply: bool) -> None:
        try:
            while True:
                chunk = source.recv(BUFFER)
                if not chunk:
                    break
                if pair in self._swallowed:
                    continue
                if reply and self.delay:
                    time.sleep(self.delay)
                target.sendall(chunk)
        except OSError:
            pass
        with self._lock:
            known = pair in self._pairs
            self._pairs.discard(pair)
            self._swallowed.discard(pair)
        if known:  # an ordinary close from one side: pass it on
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
