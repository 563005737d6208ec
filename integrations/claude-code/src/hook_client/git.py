"""The git remote of the project a session runs in, read from the repository's config
without running git (credentials removed).
"""

from __future__ import annotations

import os

from .deadline import Deadline


def find_git_remote(cwd: str, deadline: Deadline | None = None) -> str | None:
    """The origin URL of the repository around cwd, credentials removed; no git needed."""
    found = _find_git_dir(cwd)
    if not found:
        return None
    git_dir, work_tree = found
    config_dir = git_dir
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as handle:
            common = handle.read().strip()
        if common:
            config_dir = os.path.normpath(os.path.join(git_dir, common))
    except OSError:
        pass
    try:
        with open(os.path.join(config_dir, "config"), encoding="utf-8", errors="replace") as h:
            text = h.read()
    except OSError:
        return None
    remotes = parse_git_remotes(text)
    url = remotes.get("origin") or next(iter(remotes.values()), None)
    if not url and "[include" in text.lower():
        url = _git_remote_via_git(work_tree, deadline)
    return strip_credentials(url) if url else None


def _find_git_dir(cwd: str) -> tuple[str, str] | None:
    """Walk up from cwd to the nearest .git (folder, or file pointing at the real one)."""
    try:
        current = os.path.abspath(os.path.expanduser(cwd))
    except (TypeError, ValueError):
        return None
    while True:
        dot_git = os.path.join(current, ".git")
        if os.path.isdir(dot_git):
            return dot_git, current
        if os.path.isfile(dot_git):
            try:
                with open(dot_git, encoding="utf-8") as handle:
                    first = handle.readline().strip()
            except OSError:
                return None
            if first.lower().startswith("gitdir:"):
                target = first.split(":", 1)[1].strip()
                return os.path.normpath(os.path.join(current, target)), current
            return None
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def parse_git_remotes(text: str) -> dict[str, str]:
    """Read remote names and URLs from git config text."""
    import re

    remotes: dict[str, str] = {}
    section: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            end = line.find("]")
            header = line[1:end].strip() if end > 0 else ""
            line = line[end + 1 :].strip() if end > 0 else ""
            match = re.match(r'^remote\s+"((?:[^"\\]|\\.)*)"$', header, re.IGNORECASE)
            dotted = re.match(r"^remote\.(.+)$", header, re.IGNORECASE)
            if match:
                section = match.group(1).replace('\\"', '"').replace("\\\\", "\\")
            elif dotted:
                section = dotted.group(1)
            else:
                section = None
        if not line or line[0] in "#;" or section is None:
            continue
        key, sep, value = line.partition("=")
        if not sep or key.strip().lower() != "url" or section in remotes:
            continue
        remotes[section] = _git_config_value(value)
    return remotes


def _git_config_value(value: str) -> str:
    """Unquote a git config value and drop a trailing comment."""
    out = []
    quoted = False
    index = 0
    value = value.strip()
    while index < len(value):
        ch = value[index]
        if ch == '"':
            quoted = not quoted
        elif ch == "\\" and index + 1 < len(value):
            index += 1
            out.append({"n": "\n", "t": "\t"}.get(value[index], value[index]))
        elif ch in "#;" and not quoted:
            break
        else:
            out.append(ch)
        index += 1
    return "".join(out).strip()


def _git_remote_via_git(work_tree: str, deadline: Deadline | None) -> str | None:
    """Ask git itself (only when the config uses includes we do not follow)."""
    budget = 0.3 if deadline is None else min(0.3, deadline.net_remaining())
    if budget <= 0.05:
        return None
    import subprocess

    try:
        done = subprocess.run(  # noqa: S603 - fixed argument list, no shell
            ["git", "-C", work_tree, "config", "--get", "remote.origin.url"],  # noqa: S607
            capture_output=True,
            text=True,
            timeout=budget,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def strip_credentials(url: str) -> str:
    """Remove user:password@ (or a bare token@) from an http(s) remote URL."""
    import re

    url = url.strip()
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*@)(.*)$", url)
    if not match:
        return url  # scp-like git@host:org/repo has a user name, not a secret
    scheme, userinfo, rest = match.groups()
    if scheme.lower() in ("http://", "https://"):
        return scheme + rest
    user = userinfo[:-1].split(":", 1)[0]  # ssh://git:pw@host keeps only "git"
    return f"{scheme}{user}@{rest}" if user else scheme + rest
