"""Node access: everything c3 needs to run commands on a node, this machine or over SSH.

Modules: `node` (the `Node` value and its address helpers), `shell` (the one remote-exec Protocol
`Shell`, `CommandResult`, `NodeFailure`, what both implementations share), `local` (this machine),
`ssh` (the SSH implementation, the only module that imports asyncssh), `ssh_target` (OpenSSH config
and name resolution for it), `known_hosts` (the host-key files and trust), `fleet` (`open_shell`, the
one factory that picks local or SSH, `Fleet` for several nodes, `run_sync`).

Nothing is re-exported here: importing one module (a `Node`) never loads the others.
"""
