#!/usr/bin/env python3
"""An OTLP/gRPC trace receiver, written apart from the service: grpcio serving the collector's
TraceService from the opentelemetry-proto package (`pip install grpcio opentelemetry-proto`).

    otlp_receiver.py SPANS_FILE

Listens on 127.0.0.1 on a free port and prints `port <n>` once serving; appends every span it
receives to SPANS_FILE as one JSON object per line, with the resource's `service.name` and
`service.instance.id`:

    {"trace_id", "span_id", "parent_span_id", "name", "service", "instance",
     "attributes": {...}, "links": [{"trace_id", "span_id"}], "start_ns", "end_ns"}

Ids are lowercase hex, "" when absent. Stops on SIGTERM or when its stdin closes.
"""

import json
import signal
import sys
import threading
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


def value(v):
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind in ("array_value", "kvlist_value", "bytes_value"):
        return str(getattr(v, kind))
    return getattr(v, kind)


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()

    def Export(self, request, context):
        lines = []
        for resource_spans in request.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    lines.append(json.dumps({
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "name": span.name,
                        "service": resource.get("service.name"),
                        "instance": resource.get("service.instance.id"),
                        "attributes": attributes(span.attributes),
                        "links": [
                            {"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex()}
                            for link in span.links
                        ],
                        "start_ns": span.start_time_unix_nano,
                        "end_ns": span.end_time_unix_nano,
                    }))
        with self.lock, open(self.path, "a", encoding="utf-8") as out:
            for line in lines:
                out.write(line + "\n")
        return trace_service_pb2.ExportTraceServiceResponse()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: otlp_receiver.py SPANS_FILE")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Receiver(sys.argv[1]), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"port {port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    stop.wait()
    server.stop(grace=1)


if __name__ == "__main__":
    main()
