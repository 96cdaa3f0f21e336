"""What a shard folder's manifest must match for a run to resume there, and one short line of what differs."""

from __future__ import annotations


def comparable(key: str, value: object) -> object:
    """What must match for a run to resume: the input by its path, format and content, not its mtime (a
    ``touch`` changes nothing a run reads)."""
    if key == "input" and isinstance(value, dict):
        return {name: item for name, item in value.items() if name != "mtime_ns"}
    return value


def difference(key: str, there: object, now: object) -> str:
    """One short line of what differs: for the input only the fields that changed (digests cut to 12)."""
    if key == "input" and isinstance(there, dict) and isinstance(now, dict):
        changed = [f"{name} {str(there.get(name))[:12]!r} there, {str(now.get(name))[:12]!r} now"
                   for name in ("path", "format", "size", "sha256") if there.get(name) != now.get(name)]
        return "input: " + ", ".join(changed)
    return f"{key}: {there!r} there, {now!r} now"
