"""Driver credentials: the secret that proves a resume, and the fetch tokens drawn from it.

Theory of operation
-------------------
A driver's number and its head's epoch are no secret (`dista status` shows both), so a
resume pair alone proves nothing: whoever names it would take the driver's objects and
actors. A driver whose hello carries `HELLO_SECRET` is given a secret in its welcome::

    S = HMAC-SHA256(resume_key, epoch || number || identity)[:16]

``epoch`` and ``number`` are u64s (little-endian), ``identity`` the SHA-256 of the driver's
TLS certificate (empty without TLS), ``resume_key`` the head's (an argument: the runtime
derives it from the head's TLS key file, so a head restarted with the same key computes
the same S; without TLS it draws one at random). The head computes S again whenever it
needs it; it records one only where it cannot (below).

A resume is taken (`Credentials.resume_refusal`):

- while a driver holds the number (connected, or away for the recovery grace): only with
  the secret that driver holds, from the same certificate; a holder that never asked for a
  secret (a driver that knows only the page) only from its own certificate, without one;
- else, under this head's epoch, or another head's when the key is stable (the same TLS
  key): only with the S the head computes, or (this head's epoch) without a secret, since
  nothing of the number is left to take;
- else (another head's epoch and a key drawn anew: no TLS) the first resumer's secret is
  taken and kept with the number, and a later, different one is refused.

A fetch token ``T = SHA-256(b"dista fetch" || S)[:16]`` names the driver to an object
server: the head sends it in its fetch grant, the driver in its fetches, and the server
serves a fetch with a token only if that very token was granted for that object
(`dista_proto._grants`). Both ends derive it; it never crosses the head's links to the
driver.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from typing import Final

from ._conventions import SECRET_SIZE, TOKEN_SIZE

__all__ = ["RESUME_REFUSED", "Credentials", "fetch_token"]

#: How the reason of a refused resume's `Close` begins: the runtime logs it, at WARNING.
RESUME_REFUSED: Final = "refused resume"

_PAIR: Final = struct.Struct("<QQ")
_FETCH: Final = b"dista fetch"


def fetch_token(secret: bytes) -> bytes:
    """The fetch token of the driver holding ``secret`` (b"" without one)."""
    if not secret:
        return b""
    return hashlib.sha256(_FETCH + secret).digest()[:TOKEN_SIZE]


class Credentials:
    """The head's key, and its rules for resumes; see the module docstring."""

    __slots__ = ("_key", "epoch", "stable")

    def __init__(self, key: bytes, *, epoch: int, stable: bool) -> None:
        self._key = key
        self.epoch: int = epoch
        #: The key outlives this head (a TLS key file): another head's secrets can be checked.
        self.stable: bool = stable

    def secret(self, epoch: int, number: int, identity: bytes) -> bytes:
        """The secret of driver ``number`` first numbered under ``epoch``, certificate
        ``identity``."""
        message = _PAIR.pack(epoch, number) + identity
        return hmac.new(self._key, message, hashlib.sha256).digest()[:SECRET_SIZE]

    def resume_refusal(
        self,
        number: int,
        epoch: int,
        secret: bytes,
        identity: bytes,
        holder: tuple[bytes, bytes] | None,
    ) -> str | None:
        """Why a resume of ``number`` (first numbered under ``epoch``) with ``secret``, from
        certificate ``identity``, is refused, or None to take it. ``holder``: the secret
        and certificate identity of the driver that holds the number now, if one does."""
        if holder is not None:
            held, held_identity = holder
            if not hmac.compare_digest(identity, held_identity):
                return "another certificate holds that number"
            if not held:
                # A driver that knows only the page was given no secret: its own
                # certificate (or, without TLS, anyone) may take it back, as before.
                return None if not secret else "that driver was given no secret"
            if not secret:
                return "the resume carries no secret, and that driver was given one"
            return None if hmac.compare_digest(secret, held) else "the secret does not match"
        if epoch == self.epoch or self.stable:
            if not secret:
                # Nothing of a number of this head's is left once its driver is gone.
                return None if epoch == self.epoch else "the resume carries no secret"
            expected = self.secret(epoch, number, identity)
            return None if hmac.compare_digest(secret, expected) else "the secret does not match"
        return None  # another head's key, gone with it: the first resumer's secret is kept
