"""The gateway: one OpenAI-compatible endpoint for every pod of the estate, routed by model name,
starting a stopped pod on demand (`c3 gateway serve`, DESIGN.md "Gateway").

Modules: `config` (settings of one gateway, the pods it routes to and the `PodControl` it drives them
through), `slots` (per-pod on-demand state: one start however many requests wait, a bounded queue, the
idle stop), `front` (the HTTP front: the pool's strict head parser and limits, routing, the API key),
`relay` (forwarding one request to a pod and relaying its answer, streams included), `status` (the
status file `c3 gateway status` reads) and `serve` (the foreground run).

The gateway never imports the actions: the write that runs it (`backend.actions.serve_gateway`) hands
it a `PodControl` whose start and stop are `c3 pod up` / `c3 pod down`'s own actions.
"""
