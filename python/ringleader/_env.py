"""The environment a ringleader command job gives each rank (see common/command_spec.h)."""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True)
class RingleaderEnv:
    """Where and as whom this rank reports."""

    # host:port, or a comma-separated list of them (a leader and its standbys: the worker's
    # --coordinator as is; see coordinators).
    coordinator: str
    job_id: str
    generation: int  # attempt number, 1-based
    rank: int
    # Mutual TLS: ca.pem, worker.pem and worker.key there (the worker's --tls_dir); "" = plaintext.
    tls_dir: str = ""
    # The attempt's credential, sent with every call about the attempt ("" = none checked).
    attempt_token: str = ""

    @property
    def coordinators(self) -> list[str]:
        """The coordinator addresses, in order (parse_coordinator_addresses)."""
        return parse_coordinator_addresses(self.coordinator)


# Trailing metadata of a standby coordinator's refusal (UNAVAILABLE): the leader's host:port.
LEADER_METADATA_KEY = "ringleader-leader"


def parse_coordinator_addresses(text: str) -> list[str]:
    """"host:port[,host:port...]" -> the addresses in order, spaces trimmed.

    Raises ValueError (naming the entry and the expected form) for an empty list or entry, an
    entry without a numeric port, and an address given twice; the same rules as the C++
    ParseCoordinatorAddresses (common/coordinator_addresses.h). IPv6 hosts go in brackets.
    """
    def refuse(why: str) -> ValueError:
        return ValueError(f"coordinator address list {text!r}: {why} (expected "
                          "host:port[,host:port...], e.g. 10.0.0.1:7070,10.0.0.2:7070)")

    if not text.strip():
        raise refuse("no address given")
    addresses: list[str] = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            raise refuse("an empty entry")
        host, colon, port = entry.rpartition(":")
        bracketed = host.startswith("[") and host.endswith("]")
        if not colon or not host or not port or (":" in host and not bracketed) or (
                host.startswith("[") and not bracketed):
            raise refuse(f"{entry!r} has no port")
        if not (port.isascii() and port.isdigit()) or len(port) > 5:
            raise refuse(f"{entry!r} has no numeric port")
        if entry in addresses:
            raise refuse(f"{entry!r} is given twice")
        addresses.append(entry)
    return addresses


def _int(environ: Mapping[str, str], name: str, default: int | None = None) -> int:
    text = environ.get(name, "")
    if text == "":
        if default is None:
            raise ValueError(f"ringleader: {name} is not set although RINGLEADER_COORDINATOR is "
                             "(the launcher sets both)")
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"ringleader: {name}={text!r} is not an integer") from None


def from_environ(environ: Mapping[str, str] | None = None) -> RingleaderEnv | None:
    """The ringleader environment, or None outside ringleader (RINGLEADER_COORDINATOR unset).

    Raises ValueError when RINGLEADER_COORDINATOR is set but is not a host:port list, or the
    rest is missing or malformed.
    """
    env = os.environ if environ is None else environ
    coordinator = env.get("RINGLEADER_COORDINATOR", "")
    if not coordinator:
        return None
    try:
        parse_coordinator_addresses(coordinator)
    except ValueError as error:
        raise ValueError(f"ringleader: RINGLEADER_COORDINATOR: {error}") from None
    job_id = env.get("RINGLEADER_JOB", "")
    if not job_id:
        raise ValueError("ringleader: RINGLEADER_JOB is not set although RINGLEADER_COORDINATOR "
                         "is (the launcher sets both)")
    rank = _int(env, "RINGLEADER_RANK", _int(env, "RANK", 0))
    return RingleaderEnv(coordinator=coordinator, job_id=job_id,
                         generation=_int(env, "RINGLEADER_GENERATION", 1), rank=rank,
                         tls_dir=env.get("RINGLEADER_TLS_DIR", ""),
                         attempt_token=env.get("RINGLEADER_ATTEMPT_TOKEN", ""))


def world_size_from_environ(environ: Mapping[str, str] | None = None) -> int:
    """WORLD_SIZE as torchrun (and ringleader) set it; 1 when unset."""
    env = os.environ if environ is None else environ
    return _int(env, "WORLD_SIZE", 1)


def drift_interval_from_environ(environ: Mapping[str, str] | None = None) -> int:
    """The job's drift_interval_steps (RINGLEADER_DRIFT_INTERVAL_STEPS); 50 when unset."""
    env = os.environ if environ is None else environ
    return _int(env, "RINGLEADER_DRIFT_INTERVAL_STEPS", 50)
