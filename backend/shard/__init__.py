"""`c3 shard`: one vLLM server split across nodes, with Ray or vLLM's multiprocessing executor, or one
GGUF model split by layers over llama.cpp RPC workers (`rpc`, see rpc.py).

Modules: `models` (plan data), `profile` (what `--profile` means), `probe` (the per-node fact and
route scripts), `plan` (head, tp × pp, per-node address/interface env, refusals), `ray_cmds` /
`mp_cmds` (command lines), `prepare` (probe + pre-flight + plan), `render` (dry-run text),
`scripts` (launch, kill and sweep scripts, run through backend.remote.shell's Shell), `runner` (foreground run, Ctrl+C cleanup),
`ops` (install-ray, start, status, stop).

Decisions (also in the CLI help):
- **Head**: the first of `--nodes` unless `--head`; `shard start` must run on it (its part runs
  locally, every other node over SSH); `--dry-run` works from anywhere. `--backend mp` refuses a head
  that is not first, because mp ranks follow `--nodes` order.
- **GPUs**: each node is asked with `nvidia-smi --query-gpu=name,memory.total` over SSH; a node without nvidia-smi
  (or where it fails) counts 0, and the refusal says so. `--gpus-per-node N` declares the count instead
  (CPU-only test hosts); Ray is then started with `--num-gpus N` so Ray's resources match what vLLM
  will ask for. tp × pp must equal the sum; mp also needs the same count on every node.
- **Head address**: `--head-address`, else a head address on a subnet every worker also has an address
  on (a direct cluster link, e.g. a Spark's QSFP cable), preferring the registry's address among those,
  else the registry's address. Docker/libvirt bridges and loopback are never chosen.
- **Per node**: `ip -o -4 route get HEAD` on each worker gives its interface and source address:
  VLLM_HOST_IP (and Ray's --node-ip-address), NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME; the head uses
  the interface that owns the head address. mp also gets MASTER_ADDR.
- **Reachability**: while the workers test, c3 listens on the head's Ray/rendezvous port itself, so a
  successful TCP connect proves route and firewall (and a busy port is refused before anything starts).
- **Versions**: Ray (`ray --version`) and Python (the interpreter in the `ray` script's first line, or
  `--python`) must be identical on every node.
- **Secrets**: every profile env value not listed in `public_env` (or that looks like a credential, backend.secrets_env) and HF_TOKEN from
  c3's environment go to every step on stdin, never in argv or the dry-run (shown as `<hidden>`).
- **No state**: every process carries `C3_SHARD=<head>-<port>`; `shard stop`/`status` find them through
  /proc/PID/environ, one shard by its tag (`shard stop TAG`; `--all` for every shard on the nodes). Ctrl+C (SIGINT/SIGTERM): server first, `ray stop` on every node, each part's
  process group, then a sweep for anything still tagged.
- **Ports**: API 8000, Ray GCS 6379, mp rendezvous 29501; Ray/rendezvous ports inside Ray's worker
  range 10002–19999 are refused. The Ray dashboard stays off (its job API runs code for anyone).
"""
