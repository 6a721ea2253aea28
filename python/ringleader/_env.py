"""The environment a ringleader command job gives each rank (see common/command_spec.h)."""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True)
class RingleaderEnv:
    """Where and as whom this rank reports."""

    coordinator: str  # host:port
    job_id: str
    generation: int  # attempt number, 1-based
    rank: int
    # Mutual TLS: ca.pem, worker.pem and worker.key there (the worker's --tls_dir); "" = plaintext.
    tls_dir: str = ""
    # The attempt's credential, sent with every call about the attempt ("" = none checked).
    attempt_token: str = ""


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

    Raises ValueError when RINGLEADER_COORDINATOR is set but the rest is missing or malformed.
    """
    env = os.environ if environ is None else environ
    coordinator = env.get("RINGLEADER_COORDINATOR", "")
    if not coordinator:
        return None
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
