#!/usr/bin/env python3
"""A real OTLP/HTTP trace receiver for the live-telemetry test, built on the official
OpenTelemetry Python protobuf bindings (PyPI `opentelemetry-proto`).

POST /v1/traces with an `ExportTraceServiceRequest` (protobuf, optionally gzip) is decoded by
`opentelemetry.proto`, each span written to OUT as one JSON line (the protobuf JSON mapping,
ids as hex), and answered with an `ExportTraceServiceResponse` — what an OpenTelemetry
Collector's otlphttp receiver does. Prints `listening PORT` once bound to 127.0.0.1, and stops
by itself after --timeout seconds.

    receiver.py OUT [--timeout SECONDS]
"""
import argparse
import base64
import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

LOCK = threading.Lock()


def hexid(b64):
    return base64.b64decode(b64).hex() if b64 else ""


class Handler(BaseHTTPRequestHandler):
    out = None

    def log_message(self, *args):
        pass

    def do_POST(self):
        if self.path != "/v1/traces":
            self.send_error(404, "only /v1/traces")
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.headers.get("Content-Type") != "application/x-protobuf":
            self.send_error(415, "OTLP/HTTP protobuf expected")
            return
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        with LOCK, open(self.out, "a") as f:
            for rs in req.resource_spans:
                resource = MessageToDict(rs.resource)
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        d = MessageToDict(span)
                        d["traceId"] = hexid(d.get("traceId"))
                        d["spanId"] = hexid(d.get("spanId"))
                        d["resource"] = resource
                        d["scope"] = ss.scope.name
                        f.write(json.dumps(d) + "\n")
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    Handler.out = a.out
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening {srv.server_address[1]}", flush=True)
    threading.Timer(a.timeout, srv.shutdown).start()
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
