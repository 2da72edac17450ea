"""An aiohttp application served from a background thread with its own event loop: how the
embedded API server (``ksched.apiserver.http``) and the binding webhook
(``ksched.dispatch.webhook``) both serve. A base utility: it imports nothing of ksched."""

from __future__ import annotations

import asyncio
import ssl
import threading

from aiohttp import web

__all__ = ["BackgroundServer"]


class BackgroundServer:
    """``app`` served on ``host:port`` (HTTPS with ``ssl_context``) from a daemon thread named
    ``thread_name``. With ``port`` 0 the system picks one; ``port`` is the bound one once
    ``start()`` has returned."""

    def __init__(self, app: web.Application, host: str, port: int, ssl_context: ssl.SSLContext | None,
                 thread_name: str) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.thread_name = thread_name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self.thread: threading.Thread | None = None  # serving (None before start())
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None
        self._start_error: BaseException | None = None

    async def _start_async(self) -> None:
        # On stop, requests still running after shutdown_timeout are cancelled and their
        # connections closed (aiohttp waits 60 s by default: a watch that started just as the
        # server stopped held its client's stream open that long).
        self._runner = web.AppRunner(self.app, handle_signals=False, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.ssl_context, reuse_address=True)
        await site.start()
        if self.port == 0:
            sockets = site._server.sockets if site._server is not None else []  # type: ignore[union-attr]
            if sockets:
                self.port = sockets[0].getsockname()[1]

    def start(self) -> None:
        """Serve from the background thread; returns once the socket listens, or raises what
        setting it up raised (a bind error, say)."""

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            self._stopping = asyncio.Event()
            try:
                loop.run_until_complete(self._start_async())
            except BaseException as e:  # report bind errors to the caller
                self._start_error = e
                self._ready.set()
                return
            self._ready.set()
            loop.run_until_complete(self._stopping.wait())
            loop.run_until_complete(self._runner.cleanup())  # type: ignore[union-attr]
            loop.close()

        self.thread = threading.Thread(target=run, name=self.thread_name, daemon=True)
        self.thread.start()
        self._ready.wait(30)
        if self._start_error is not None:
            raise self._start_error

    def stop(self) -> None:
        """Stop serving; waits up to 10 s for the thread to clean up."""
        if self._loop is not None and self._stopping is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stopping.set)
        if self.thread is not None:
            self.thread.join(10)

    def wait(self) -> None:
        """Block until stopped."""
        if self.thread is not None:
            while self.thread.is_alive():
                self.thread.join(0.5)
