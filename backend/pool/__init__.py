"""The pool router: one OpenAI endpoint in front of several nodes serving the same model.

Modules: `keys` (sticky modes, sessions, salted key hashing), `ring` (consistent hashing), `pins` (pin table),
`health` (probe/passive state machine), `upstream` (backends, connection pools, probes), `heads`
(strict llhttp head parsing and re-serialization), `http1` (checked chunk framing and body relays),
`intake` (request bodies: bounded, re-framed, on a deadline), `budget` (one cap on held request bytes), `listener` (accept loop with EMFILE
backoff), `proxy` (the HTTP front end), `client` (what the request helpers use of proxy's server and connections), `respond` (relaying an answer), `router` (choices and background loops),
`metrics` (Prometheus text), `status` (status files, reading a running router), `serve` (foreground
run with drain), `service` (systemd unit).
"""
