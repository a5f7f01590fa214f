"""Node access: everything c3 needs to run commands on a node, this machine or over SSH.

Modules: `node` (the `Node` value and its address helpers), `shell` (the one remote-exec Protocol
`Shell`, `CommandResult`, `NodeFailure`, what both implementations share), `local` (this machine),
`ssh` (the SSH implementation, the only module that imports asyncssh), `ssh_target` (OpenSSH config
and name resolution for it), `known_hosts` (the host-key files and trust), `fleet` (`open_shell`, the
one factory that picks local or SSH, `Fleet` for several nodes, `run_sync`).

Nothing is re-exported here: importing one module (a `Node`) never loads the others.
"""

import warnings

# asyncssh (2.24) names cryptography's DSA types at import, and cryptography 47+ warns that DSA is
# deprecated: two lines of warning on stderr before every SSH command's own output. c3 never offers
# DSA keys; the warning is not the user's to act on.
warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh\.")
