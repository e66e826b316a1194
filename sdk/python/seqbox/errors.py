"""The answers an agent's handler raises, and what the gateway makes of them."""

import math


class Permanent(Exception):
    """The event can never be processed: answered 422, the gateway
    dead-letters it (and blocks its key under --on-dead-letter block).

    Raised inside an effect's call, it also says the remote side refused
    the call for good: the ledger records it failed (a redrive of the
    dead letter calls again under the same idempotency key)."""


class Retry(Exception):
    """The event was not processed; try it again later: answered 503 with
    Retry-After (seconds, at least 1), under the same Idempotency-Key.
    after is seconds, finite and not negative (ValueError otherwise).

    Raised inside an effect's call, it also says the remote side did not
    apply the call (a 429, a refusal that may pass later): the ledger
    records the call failed, and the retry calls again under the same key.
    """

    def __init__(self, reason="retry later", after=1.0):
        super().__init__(reason)
        if isinstance(after, bool) or not isinstance(after, (int, float)):
            # float("5") and float(True) would pass: the docs promise a
            # number of seconds.
            raise ValueError(f"Retry: after is {after!r} ({type(after).__name__}): seconds, a number")
        after = float(after)
        if not math.isfinite(after) or after < 0:
            raise ValueError(f"Retry: after is {after}: seconds, finite and not negative")
        self.after = after


class Stale(Exception):
    """The agent's object is already newer than this event: answered 409
    with outcome stale; the event ends stale and its key moves on."""

    outcome = "stale"


class VersionConflict(Stale):
    """The agent holds this version from another event: answered 409 with
    outcome version_conflict; the event is parked for investigation."""

    outcome = "version_conflict"


class GatewayError(Exception):
    """The gateway's agent API could not be reached or refused a request.

    definite says the refusal concerns this event alone and a retry would
    meet it again (the gateway's 400, 403, 404, 405, 413): the handler
    answers 422, as for Permanent, with the gateway's detail. Otherwise
    (a 5xx, no connection) it answers 503: the event is retried."""

    DEFINITE = frozenset({400, 403, 404, 405, 413})

    def __init__(self, message, status=0, problem=None):
        super().__init__(message)
        self.status = status
        self.problem = problem or {}
        self.definite = status in self.DEFINITE


class Waiting(Exception):
    """A step or effect of this event runs in another live caller, or an
    uncertain call may still be running at the remote side: answered 503
    with an agent-waits problem, which the gateway checks against its
    ledger and retries without spending an attempt.

    kind is "step" or "effect", call_name the step's or effect's name
    (callName in the TypeScript SDK; name is the same, kept for older
    code), after the seconds to wait."""

    def __init__(self, kind, name, after):
        super().__init__(f"waiting for {kind} {name!r} ({after:.1f}s)")
        self.kind = kind
        self.name = name
        self.after = after

    @property
    def call_name(self):
        """The step's or effect's name (TypeScript: callName)."""
        return self.name
