"""The simulated world `c3 demo`, the tests and the benchmarks run on — no GPU, no Docker:

- `stub_engine`: an OpenAI-compatible server (standard library only) that boots, logs, serves and
  registers its GPUs like vLLM; also the entrypoint of the test rig's container image. Its parts are
  `stub_config` (argv and env), `stub_gpu_registration`, `stub_boot` (the boot log), `stub_state`
  (counters, prefix cache, /metrics) and `stub_http` (the server side);
- `probe`: a simulated rig (`C3_RIG=rig.yaml`, or the built-in demo rig) behind the `GpuProbe`
  protocol, whose compute processes are the stub engines' GPU registrations;
- `runtime`: the `PodRuntime` whose workloads are stub-engine processes on this machine.

Everything else in c3 sees these only through the same protocols as the real NVML and Docker.
Nothing is imported here: the stub engine must run as a bare script; the composition root
`backend.wiring` picks the probe and the runtime.
"""
