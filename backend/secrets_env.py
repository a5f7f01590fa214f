"""Which environment values are secret: by name, by value, and by default.

A recipe's or shard profile's `env` is written by the user, and c3 cannot know what each value is.
So every entry is treated as a secret — sent to the node in a 0600 env file or on stdin, shown as
`NAME=<redacted>` in dry-runs, never in argv, logs or JSON — unless the recipe/profile lists the name
in `public_env`. Even a public name stays secret when its name or value looks like a credential:

- names containing TOKEN, KEY, SECRET, PASS (PASSWORD, PASSWD, *_PASS), AUTH, CREDENTIAL, COOKIE,
  SESSION or PRIVATE;
- values holding a URL with a password (`http://user:pw@proxy:3128`), a bearer/basic header, a PEM
  block, or a token with a well-known prefix (hf_, sk-, ghp_/gho_/github_pat_, glpat-, xox?-, AKIA…).

What c3 itself puts in the environment in the clear (VLLM_HOST_IP, NCCL_SOCKET_IFNAME, C3_SHARD, …)
does not pass through here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from backend.errors import UsageError

SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASS|AUTH|CREDENTIAL|COOKIE|SESSION|PRIVATE", re.IGNORECASE)
SECRET_VALUE = re.compile(
    r"[a-z][a-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@"  # URL with user:password@ (proxies, registries)
    r"|\b(?:bearer|basic)\s+\S{8,}"  # an Authorization header value
    r"|-----BEGIN [A-Z ]*PRIVATE KEY"  # a PEM private key
    r"|\b(?:hf_|sk-|sk_live_|ghp_|gho_|ghs_|github_pat_|glpat-|xox[abpr]-|AKIA|ASIA)[A-Za-z0-9_\-]{8,}",
    re.IGNORECASE,
)


def looks_secret(name: str, value: str) -> bool:
    """True when the name or the value looks like a credential."""
    return bool(SECRET_NAME.search(name) or SECRET_VALUE.search(str(value)))


def split_secrets(env: Mapping[str, str], public: Iterable[str] = ()) -> tuple[dict[str, str], dict[str, str]]:
    """(shown, secret): only names listed in `public` that do not look like credentials are shown."""
    allowed = set(public)
    shown = {k: v for k, v in env.items() if k in allowed and not looks_secret(k, v)}
    secret = {k: v for k, v in env.items() if k not in shown}
    return shown, secret


_LINE_BREAKING = re.compile(r"[\r\n\x00]")


def check_env_file(env: Mapping[str, str], *, where: str) -> None:
    """UsageError unless every value of `env` fits on one `NAME=VALUE` line of an env file.

    A CR, LF or NUL in a value would end its line and start another (`HF_TOKEN=$'x\\nLD_PRELOAD=…'`
    adds a variable docker then sets), so such a value is refused, by name: the value is never shown.
    `where` says where the values come from, for the hint."""
    for name, value in env.items():
        if _LINE_BREAKING.search(str(value)):
            raise UsageError(f"the value of {name} holds a line break or NUL (CR, LF or \\0); an env file holds one NAME=VALUE per line",
                             hint=f"fix the value in {where} or in c3's environment (HF_TOKEN); nothing was written or started")
