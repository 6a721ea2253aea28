"""FNV-1a 64-bit digest of one step's collective fingerprints.

Every rank of a correct data-parallel job issues the same collectives in the same order, so
every rank computes the same digest; the coordinator compares them (COLLECTIVE_MISMATCH).
"""
from __future__ import annotations

import struct
from collections.abc import Sequence

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = 0xFFFFFFFFFFFFFFFF

# One fingerprint: (kind, bucket index, elements, dtype), e.g. ("allreduce", 0, 235146, "float32").
Fingerprint = tuple[str, int, int, str]

_cache: dict[tuple[Fingerprint, ...], int] = {}


def fnv1a64(data: bytes, h: int = _FNV_OFFSET) -> int:
    """FNV-1a over `data`, continuing from `h`."""
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return h


def encode(sequence: int, fingerprint: Fingerprint) -> bytes:
    """Bytes hashed for one collective: sequence-in-step (u64), bucket (i32), elements (u64),
    then kind and dtype as length-prefixed UTF-8, all little-endian."""
    kind, bucket, elements, dtype = fingerprint
    kind_b, dtype_b = kind.encode(), dtype.encode()
    return (struct.pack("<QiQ", sequence, bucket, elements) +
            struct.pack("<I", len(kind_b)) + kind_b + struct.pack("<I", len(dtype_b)) + dtype_b)


def collective_digest(fingerprints: Sequence[Fingerprint]) -> int:
    """Digest of one step's collectives in issue order (sequence numbers start at 0).

    The same few sequences repeat every step, so results are memoised.
    """
    key = tuple(fingerprints)
    cached = _cache.get(key)
    if cached is not None:
        return cached
    h = _FNV_OFFSET
    for sequence, fingerprint in enumerate(key):
        h = fnv1a64(encode(sequence, fingerprint), h)
    if len(_cache) < 1024:
        _cache[key] = h
    return h
