"""Settings from the environment and ~/.sessionhub/config.json (environment wins)."""

from __future__ import annotations

import json
import os

from .constants import (
    CONTINUITY_PATH,
    DEFAULT_TIMEOUT,
    GATEWAY_PATHS,
    HOOKS_PATH,
    MCP_PATH,
    SPOOL_MAX_EVENTS,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def sessionhub_dir() -> str:
    """Return the client's home folder, ~/.sessionhub."""
    return os.path.join(os.path.expanduser("~"), ".sessionhub")


class Config:
    """Settings from the environment and ~/.sessionhub/config.json (environment wins)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        home = sessionhub_dir()
        self.config_path = os.path.expanduser(
            env.get("SESSIONHUB_CONFIG") or os.path.join(home, "config.json")
        )
        self.log_path = os.path.join(home, "hook.log")
        self.file_error = ""
        data = self._read_file()
        self.url_source = "env" if env.get("SESSIONHUB_URL") else "config"
        self.token_source = "env" if env.get("SESSIONHUB_TOKEN") else "config"
        self.url = _clean_base_url(env.get("SESSIONHUB_URL") or _str(data.get("url")))
        self.token = (env.get("SESSIONHUB_TOKEN") or _str(data.get("token"))).strip()
        self.timeout = _parse_timeout(env.get("SESSIONHUB_TIMEOUT"), data.get("timeout"))
        spool = env.get("SESSIONHUB_SPOOL") or _str(data.get("spool_path"))
        self.spool_path = os.path.expanduser(spool or os.path.join(home, "spool.jsonl"))
        self.spool_max = _parse_count(
            env.get("SESSIONHUB_SPOOL_MAX_EVENTS"), data.get("spool_max_events"), SPOOL_MAX_EVENTS
        )

    def _read_file(self) -> dict:
        """Load the JSON config file; a missing or broken file counts as empty."""
        try:
            with open(self.config_path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            self.file_error = f"cannot read {self.config_path}: {exc}"
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def configured(self) -> bool:
        """Whether both a server URL and a token are known."""
        return bool(self.url and self.token)

    @property
    def hooks_url(self) -> str:
        """Endpoint that takes Claude Code hook payloads."""
        return self.url + HOOKS_PATH

    def hooks_url_for(self, gateway: str) -> str:
        """Endpoint that takes the hook payloads of a gateway (Claude Code's by default)."""
        return self.url + GATEWAY_PATHS.get(gateway, HOOKS_PATH)

    @property
    def continuity_url(self) -> str:
        """Endpoint that answers with the continuity preamble."""
        return self.url + CONTINUITY_PATH


def _str(value: object) -> str:
    """Return value if it is a string, else an empty string."""
    return value if isinstance(value, str) else ""


def _parse_count(env_value: object, file_value: object, default: int) -> int:
    """A positive count from the environment or the config file, else the default."""
    for value in (env_value, file_value):
        try:
            number = int(str(value).strip()) if value not in (None, "") else 0
        except ValueError:
            continue
        if number > 0:
            return number
    return default


def _clean_base_url(url: str) -> str:
    """Normalise the server URL to its base (no trailing slash or API path)."""
    url = url.strip().rstrip("/")
    for suffix in (*GATEWAY_PATHS.values(), CONTINUITY_PATH, MCP_PATH, "/api/v1", "/api"):
        if url.endswith(suffix):
            url = url[: -len(suffix)].rstrip("/")
            break
    return url


def _parse_timeout(*candidates: object) -> float:
    """Pick the first usable timeout (seconds) and keep it within sane bounds."""
    for value in candidates:
        if value is None or value == "":
            continue
        try:
            seconds = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        if seconds == seconds:  # not NaN
            return min(max(seconds, 0.2), 120.0)
    return DEFAULT_TIMEOUT
