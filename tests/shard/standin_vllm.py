"""A stand-in for `vllm serve` (tests only): joins the shard the way vLLM does, then serves /v1/models.

Ray backend: attaches to the running cluster (RAY_ADDRESS), requires every node's GPUs to be there,
reserves one GPU bundle per GPU with STRICT_SPREAD across nodes and runs a task in each (so both
nodes really execute work), the way vLLM's Ray executor places its workers.
mp backend: rank 0 listens on --master-addr:--master-port; every other rank connects and reports its
argv and environment; rank 0 waits for all of them, then serves.

Its /v1/models answer carries what it saw under `c3_standin`, for the test to check. It answers
POST /v1/completions with one token (" world"), the way vLLM's OpenAI server does.
The test writes this file out with the Ray venv's interpreter in its first line; a test may put
`STANDIN_LOAD_S = N` before this text: rank 0 then "loads weights" for N s after the rendezvous
before it serves (every rank says it is loading); `STANDIN_COMPLETION = "fail"` makes every completion
an HTTP 500 with vLLM's own EngineDeadError message, `"hang"` makes it never answer, `"hostile"` answers
a token that is a terminal escape.
"""

import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ENV_KEYS = ("VLLM_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "MASTER_ADDR", "RAY_ADDRESS", "C3_SHARD")


def opt(args, name, default=None):
    return args[args.index(name) + 1] if name in args else default


def main():
    args = sys.argv[1:]
    assert args[0] == "serve", args
    model = args[1]
    tp, pp = int(opt(args, "--tensor-parallel-size", 1)), int(opt(args, "--pipeline-parallel-size", 1))
    backend = opt(args, "--distributed-executor-backend", "ray")
    info = {
        "argv": args,
        "env": {k: os.environ.get(k) for k in ENV_KEYS},
        "hf_token_seen": bool(os.environ.get("HF_TOKEN")),
        "pid": os.getpid(),
    }
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    if backend == "ray":
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        ray.init(address=os.environ["RAY_ADDRESS"], logging_level="ERROR", log_to_driver=False)
        # ray.init installs its own SIGTERM handler (a slow driver shutdown); a stand-in just leaves.
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        nodes = [n for n in ray.nodes() if n["Alive"]]
        gpus = sum(n["Resources"].get("GPU", 0) for n in nodes)
        print(f"standin: Ray sees {len(nodes)} node(s), {gpus:g} GPU(s)", flush=True)
        if gpus < tp * pp:
            print(f"standin: tp*pp={tp * pp} > GPUs {gpus:g}", flush=True)
            sys.exit(3)
        pg = placement_group([{"GPU": 1, "CPU": 0.01}] * (tp * pp), strategy="STRICT_SPREAD" if len(nodes) >= tp * pp else "PACK")
        ray.get(pg.ready(), timeout=120)

        @ray.remote(num_gpus=1, num_cpus=0.01)
        def where():
            return {"ip": ray.util.get_node_ip_address(), "vllm_host_ip": os.environ.get("VLLM_HOST_IP"),
                    "nccl": os.environ.get("NCCL_SOCKET_IFNAME")}

        refs = [where.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i)).remote()
                for i in range(tp * pp)]
        info["workers"] = ray.get(refs, timeout=120)
        info["ray_nodes"] = [{"address": n["NodeManagerAddress"], "GPU": n["Resources"].get("GPU", 0)} for n in nodes]
        print(f"standin: workers ran on {[w['ip'] for w in info['workers']]}", flush=True)
    else:
        rank, nnodes = int(opt(args, "--node-rank")), int(opt(args, "--nnodes"))
        master, mport = opt(args, "--master-addr"), int(opt(args, "--master-port"))
        if rank > 0:
            deadline = time.monotonic() + 90
            while True:
                try:
                    with socket.create_connection((master, mport), timeout=5) as s:
                        s.sendall((json.dumps({"rank": rank, **info}) + "\n").encode())
                        s.recv(1)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        sys.exit(4)
                    time.sleep(0.3)
            print(f"standin: rank {rank} joined {master}:{mport}", flush=True)
            print(f"standin: rank {rank} loading weights", flush=True)
            while True:
                time.sleep(3600)
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((master, mport))
        server.listen(16)
        ranks = []
        while len(ranks) < nnodes - 1:
            conn, _ = server.accept()
            with conn:
                ranks.append(json.loads(conn.makefile().readline()))
                conn.sendall(b"k")
        info["ranks"] = sorted(ranks, key=lambda r: r["rank"])
        print(f"standin: rank 0 has ranks {[r['rank'] for r in info['ranks']]}", flush=True)
    load_s = float(globals().get("STANDIN_LOAD_S", 0))
    if load_s:
        print(f"standin: loading weights ({load_s:g} s)", flush=True)
        time.sleep(load_s)
    body = json.dumps({"object": "list", "data": [{"id": model, "object": "model"}], "c3_standin": info}).encode()

    completion = globals().get("STANDIN_COMPLETION", "answer")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != "/v1/completions":
                return self.answer(404, {"error": {"message": f"no route {self.path}"}})
            print(f"standin: completion asked ({completion})", flush=True)
            if completion == "hang":
                while True:
                    time.sleep(3600)
            if completion == "fail":
                # vLLM's answer once its engine core died (EngineDeadError).
                return self.answer(500, {"error": {"message": "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                                                   "type": "InternalServerError", "code": 500}})
            # "hostile": a token that is a terminal escape (set the window title) followed by text.
            text = "\x1b]0;pwned\x07 hi" if completion == "hostile" else " world"
            self.answer(200, {"id": "cmpl-standin", "object": "text_completion", "model": model,
                              "choices": [{"index": 0, "text": text, "finish_reason": "length"}],
                              "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

        def answer(self, status, payload):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    httpd = ThreadingHTTPServer(("0.0.0.0", int(opt(args, "--port", 8000))), Handler)
    print("standin: serving /v1/models and /v1/completions", flush=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
