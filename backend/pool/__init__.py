"""The pool router: one OpenAI endpoint in front of several nodes serving the same model.

Modules: `keys` (sticky modes, salted key hashing), `ring` (consistent hashing), `pins` (pin table),
`health` (probe/passive state machine), `upstream` (backends, connection pools, probes), `http1`
(head parsing and body relays), `proxy` (the HTTP front end), `router` (choices and background loops),
`metrics` (Prometheus text), `status` (status files, reading a running router), `serve` (foreground
run with drain), `service` (systemd unit).
"""
