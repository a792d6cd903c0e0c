"""gRPC server flavours for the Run stream (figures, not tests). Prints one JSON object.

Run: ``python bench/bench_grpc_server.py [--rpcs N]``. One server-streaming method shaped like
``Run`` (a ~200 KB request in; five small progress events and a ~200 KB result out), served by
the synchronous ``grpc.server`` our service uses and by ``grpc.aio``, each over a real TCP
socket on loopback and called by the same synchronous client, at 1 and 8 calls in flight. The
difference is what moving the service to ``grpc.aio`` could save per rollout on this machine
(issue 13 item 7); the sync figure is also the transport floor under the service's own
overhead (``bench_sandbox.py``'s ``grpc_overhead``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import grpc

METHOD = "/bench.Bench/Run"
EVENTS = [b"e" * 120] * 5
RESULT = b"r" * 200 * 1024


def _stream_sync(request: bytes, context):
    yield from EVENTS
    yield RESULT


async def _stream_aio(request: bytes, context):
    for event in EVENTS:
        yield event
    yield RESULT


def _handler(fn) -> grpc.GenericRpcHandler:
    return grpc.method_handlers_generic_handler(
        "bench.Bench", {"Run": grpc.unary_stream_rpc_method_handler(fn)}
    )


def sync_server() -> tuple[int, Callable[[], None]]:
    server = grpc.server(ThreadPoolExecutor(max_workers=16))
    server.add_generic_rpc_handlers((_handler(_stream_sync),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return port, lambda: server.stop(None).wait()


def aio_server() -> tuple[int, Callable[[], None]]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((_handler(_stream_aio),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    server, port = asyncio.run_coroutine_threadsafe(start(), loop).result(30)

    def stop() -> None:
        asyncio.run_coroutine_threadsafe(server.stop(None), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)

    return port, stop


def measure(port: int, n: int, concurrency: int) -> dict[str, float]:
    """Wall time of one call, over ``n`` calls per client thread (``concurrency`` threads)."""
    request = b"q" * 200 * 1024
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_stream(METHOD)
        for _ in range(20):
            list(call(request))

        def client(_: int) -> list[float]:
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                out = list(call(request))
                times.append((time.perf_counter() - t0) * 1000)
                assert len(out) == len(EVENTS) + 1
            return times

        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            times = sorted(t for ts in pool.map(client, range(concurrency)) for t in ts)
    return {"p50_ms": statistics.median(times), "p90_ms": times[int(0.9 * (len(times) - 1))]}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rpcs", type=int, default=800, help="calls per server and concurrency")
    args = parser.parse_args()
    result: dict = {}
    for concurrency in (1, 8):
        for name, start in (("sync", sync_server), ("aio", aio_server)):
            port, stop = start()
            try:
                result[f"{name}_c{concurrency}"] = measure(port, args.rpcs // concurrency, concurrency)
            finally:
                stop()
        result[f"aio_over_sync_p50_c{concurrency}"] = (
            result[f"aio_c{concurrency}"]["p50_ms"] / result[f"sync_c{concurrency}"]["p50_ms"]
        )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
