"""`c3 gateway litellm-config`: a LiteLLM proxy config (`model_list`) for those who already run LiteLLM in
front of their clients. One entry per name the gateway routes (`route_names`: each pod, then each model
name), each sent through LiteLLM's OpenAI-compatible provider to the gateway, which does the routing,
the on-demand start and the swap. The key is never written: LiteLLM reads it from the environment
(LiteLLM's own `os.environ/` reference form), so the file can be shared and checked in.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import yaml

from backend.envnames import check_env_name
from backend.errors import UsageError
from backend.gateway.config import DEFAULT_PORT, GatewayPod, route_names

DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"
DEFAULT_KEY_ENV = "C3_GATEWAY_API_KEY"


def api_base(url: str) -> str:
    """The gateway's OpenAI base (`…/v1`) from its address; UsageError for anything but a plain http(s) URL."""
    hint = f"the gateway's address, e.g. --url {DEFAULT_URL}"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UsageError("--url is not a valid address", hint=hint) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError("--url must be an http:// or https:// address with a host", hint=hint)
    if parts.username is not None or parts.password is not None:
        raise UsageError("--url must not carry a user or password (LiteLLM sends the key from --api-key-env)", hint=hint)
    if parts.query or parts.fragment or parts.path not in ("", "/", "/v1", "/v1/"):
        raise UsageError("--url must be the gateway's address alone (no path, query or fragment)", hint=hint)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}{'' if port is None else f':{port}'}/v1"


def litellm_config(pods: list[GatewayPod], url: str = DEFAULT_URL, key_env: str = DEFAULT_KEY_ENV) -> str:
    """The YAML text: a comment saying what it is, then `model_list`."""
    base = api_base(url)
    check_env_name(key_env, "--api-key-env")
    entries = [{"model_name": name, "litellm_params": {"model": f"openai/{name}", "api_base": base, "api_key": f"os.environ/{key_env}"}}
               for name in route_names(pods)]
    header = (f"# LiteLLM proxy config for the c3 gateway at {base.removesuffix('/v1')} (`c3 gateway litellm-config`).\n"
              f"# LiteLLM reads the gateway's key from ${key_env} (set it to any value when the gateway has no key).\n")
    return header + yaml.safe_dump({"model_list": entries}, sort_keys=False, allow_unicode=True, width=1000)
