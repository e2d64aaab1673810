"""Serve the Gemma 3 270M base model over the OpenAI-compatible API (xllamacpp).

Usage: serve.py PORT [MODEL_PATH]
Listens on 127.0.0.1 only, n_ctx 4096, 2 threads, with a chat template that
teaches the base model a <tool_call> format llama.cpp's parser recognises.
Prints "ready on http://127.0.0.1:PORT/v1" once /v1/models answers. SIGTERM stops it.
"""
import os
import signal
import sys
import time
import urllib.request

import xllamacpp

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(os.path.dirname(here))


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: serve.py PORT [MODEL_PATH]", file=sys.stderr)
        return 2
    port = int(sys.argv[1])
    model = sys.argv[2] if len(sys.argv) > 2 else os.path.join(repo, ".model", "gemma-3-270m-q4_k_m.gguf")
    if not os.path.isfile(model):
        print(f"serve: model not found: {model} (run scripts/local-model/setup.sh)", file=sys.stderr)
        return 1
    with open(os.path.join(here, "gemma-tools.jinja"), encoding="utf-8") as f:
        template = f.read()

    params = xllamacpp.CommonParams()
    params.model.path = model
    params.n_ctx = 4096
    params.use_jinja = True
    params.cpuparams.n_threads = 2
    params.port = port
    params.hostnames = ["127.0.0.1"]
    params.chat_template = template

    stop = {"now": False}

    def on_term(signum, frame):
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    server = xllamacpp.Server(params)  # noqa: F841  (keeps the server alive)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not stop["now"]:
        try:
            with urllib.request.urlopen(url + "/models", timeout=2) as r:
                if r.status == 200:
                    print(f"ready on {url}", flush=True)
                    break
        except Exception:
            time.sleep(0.2)
    else:
        if not stop["now"]:
            print("serve: server did not answer /v1/models within 60 s", file=sys.stderr)
            return 1
    while not stop["now"]:
        time.sleep(0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
