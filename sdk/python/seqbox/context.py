"""One event being handled: its attributes, and its memoised steps and
once-only effects through the gateway (docs/agents.md)."""

import json
import re
import threading
import unicodedata

from .errors import GatewayError, Permanent, Retry, Waiting
from .gateway import EventAPI, encode_json

# How many times a step or effect goes round begin before it gives up for
# this call (a row that keeps changing under it).
_ROUNDS = 4

# The most bytes (UTF-8) of an effect's ref and of a call's error the
# gateway takes.
MAX_TEXT_BYTES = 4096

# The most bytes (UTF-8) of a result reference the gateway keeps
# (seqboxtype.MaxAttributeSize).
MAX_RESULT_REFERENCE = 1024

# The most bytes of a step's result, as compact JSON, the gateway takes.
MAX_RESULT_BYTES = 256 << 10

# What a step or effect name may be (docs/agents.md).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class Context:
    """The event the gateway dispatched, as the handler sees it.

    event is the CloudEvent (a dict); id, source, type and data are its
    attributes; key is its partition key (its partitionkey attribute, else
    the Seqbox-Partition-Key header) and version its object version (None
    without); idempotency_key is the same on every retry of the
    event; consumer is the gateway's consumer.

    result_reference, when the handler sets it (a str: what its effect
    produced, such as the id of the task it created), is sent with its
    2xx answer in the Seqbox-Result-Reference header, and the gateway
    keeps it on the event's inbox row (seqbox inbox show). At most 1,024
    bytes of UTF-8 with no control character: anything else raises
    ValueError where it is set.
    """

    def __init__(self, event, headers, gateways, timeout=10.0):
        self.event = event
        self.id = event["id"]
        self.source = event["source"]
        self.type = event["type"]
        self.data = event.get("data")
        key = event.get("partitionkey")
        self.key = key if isinstance(key, str) and key else _utf8(headers.get("Seqbox-Partition-Key")) or None
        version = headers.get("Seqbox-Object-Version")
        self.version = int(version) if version else event.get("objectversion")
        self.idempotency_key = headers.get("Idempotency-Key")
        self.consumer = headers.get("Seqbox-Consumer")
        self.token = headers.get("Seqbox-Effects-Token")
        self._result_reference = None
        self._api = None
        if self.token and gateways:
            self._api = EventAPI(gateways, self.source, self.id, self.token, timeout)

    @property
    def result_reference(self):
        """What the handler named as its effect's result (None: nothing)."""
        return self._result_reference

    @result_reference.setter
    def result_reference(self, ref):
        if ref is not None:
            if not isinstance(ref, str):
                raise ValueError("result_reference must be a str, not %s" % type(ref).__name__)
            if len(ref.encode("utf-8", "surrogatepass")) > MAX_RESULT_REFERENCE:
                raise ValueError("result_reference is over %d bytes of UTF-8" % MAX_RESULT_REFERENCE)
            try:
                ref.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("result_reference holds a lone surrogate: it is not UTF-8 text") from None
            if any(unicodedata.category(c) == "Cc" for c in ref):
                raise ValueError("result_reference holds a control character")
        self._result_reference = ref

    def _gateway(self):
        if self._api is None:
            raise Permanent("no Seqbox-Effects-Token on this call, or no gateway URL configured: "
                            "steps and effects need both")
        return self._api

    def step(self, name, fn):
        """Returns the recorded result of the step name, or runs fn() once,
        records its result (any JSON value) and returns it. The result is
        returned as JSON gives it back, the same on every retry.

        A result JSON cannot hold (NaN, Infinity, a set, a cycle) or over
        256 KiB of JSON is recorded failed and raises Permanent."""
        _check_name("step", name)
        api = self._gateway()
        for _ in range(_ROUNDS):
            row = api.call("step", name, {"op": "begin"})
            if row["state"] == "succeeded":
                return row.get("result")
            if not row.get("granted"):
                raise Waiting("step", name, row.get("retry_after_ms", 1000) / 1000)
            call = row["call"]
            try:
                with _Heartbeat(api, "step", name, call, row["heartbeat_ms"]):
                    result = fn()
            except BaseException as e:
                _record_quietly(api, "step", name, {"op": "record", "call": call, "state": "failed", "error": _text(e)})
                raise
            try:
                raw = encode_json(result)
            except (TypeError, ValueError, RecursionError) as e:
                refusal = Permanent(f"step {name!r}: its result cannot be recorded as JSON "
                                    f"(NaN or Infinity, a set, a cycle...): {type(e).__name__}: {e}")
            else:
                refusal = None if len(raw) <= MAX_RESULT_BYTES else Permanent(
                    f"step {name!r}: its result is {len(raw)} bytes of JSON, over the gateway's {MAX_RESULT_BYTES}")
            if refusal is not None:
                _record_quietly(api, "step", name, {"op": "record", "call": call, "state": "failed", "error": _text(refusal)})
                raise refusal
            encoded = json.loads(raw)
            api.call("step", name, {"op": "record", "call": call, "state": "succeeded", "result": encoded})
            return encoded
        raise Retry(f"step {name!r} kept changing under this call")

    def effect(self, action, fn, reconcile=None):
        """Makes the call fn(idempotency_key) once for this event and
        action, and returns its reference (a string: fn's return value,
        cut to 4096 bytes of UTF-8 as the ledger keeps it).

        A call already made returns its recorded reference without
        calling. fn raising Permanent or Retry says the remote side did not
        apply it (recorded failed); any other exception leaves it uncertain.
        An uncertain call (this agent died mid-call, say) is never made
        again blind: reconcile(idempotency_key) asks the remote side and
        returns the reference it has, or None when it has nothing; without
        reconcile, the event waits for an operator (`seqbox effects
        resolve`)."""
        _check_name("effect", action)
        api = self._gateway()
        for _ in range(_ROUNDS):
            row = api.call("effect", action, {"op": "begin"})
            state, key = row["state"], row["idempotency_key"]
            if state == "succeeded":
                return row.get("ref", "")
            if state == "uncertain":
                if reconcile is None:
                    raise Retry(f"effect {action!r} ({key}) is uncertain and this agent has no reconcile: "
                                f"resolve it with `seqbox effects resolve {key}`", after=5)
                if "retry_after_ms" not in row:
                    found = reconcile(key)
                    row = api.call("effect", action, {"op": "reconcile", "applied": found is not None,
                                                      "ref": "" if found is None else _cut(_ref_text(found))})
                    if row["state"] == "succeeded":
                        return row.get("ref", "")
                if row["state"] == "uncertain":
                    raise Waiting("effect", action, row.get("retry_after_ms", 1000) / 1000)
                continue  # failed: begin grants a new call under the same key
            if not row.get("granted"):
                raise Waiting("effect", action, row.get("retry_after_ms", 1000) / 1000)
            call = row["call"]
            try:
                with _Heartbeat(api, "effect", action, call, row["heartbeat_ms"]):
                    ref = fn(key)
            except (Permanent, Retry) as e:
                _record_quietly(api, "effect", action, {"op": "record", "call": call, "state": "failed", "error": _text(e)})
                raise
            except BaseException as e:
                _record_quietly(api, "effect", action, {"op": "record", "call": call, "state": "uncertain", "error": _text(e)})
                raise Retry(f"effect {action!r} ({key}) may or may not have taken effect: {_text(e)}") from e
            ref = "" if ref is None else _cut(_ref_text(ref))
            api.call("effect", action, {"op": "record", "call": call, "state": "succeeded", "ref": ref})
            return ref
        raise Retry(f"effect {action!r} kept changing under this call")


def _check_name(kind, name):
    """Raises Permanent unless name is a step's or effect's name the
    gateway takes."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or (kind == "effect" and name == "agent"):
        raise Permanent(f"{kind} name {name!r} is not allowed: a letter or digit, then up to 63 letters, "
                        f"digits, '.', '_' or '-' (and an effect may not be named 'agent', the gateway's own call)")


def _utf8(value):
    """A header's value as the gateway wrote it, UTF-8: http.server and
    WSGI hand header bytes over decoded as Latin-1."""
    if not value:
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def _record_quietly(api, kind, name, body):
    """Records a failed or uncertain call; a record that does not get
    through leaves the row pending, which turns uncertain once its lease
    runs out: the error that is raised is the call's own."""
    try:
        api.call(kind, name, body)
    except GatewayError:
        pass


def _text(e):
    """An error as the ledger keeps it: its type and message, cut to fit."""
    return _cut(f"{type(e).__name__}: {e}")


def _ref_text(ref):
    """The reference a call returned, as the ledger keeps it: a string as
    it is, anything else as its JSON (a dict read as Python's repr), or
    str() of what JSON cannot hold."""
    if isinstance(ref, str):
        return ref
    try:
        return encode_json(ref).decode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return str(ref)


def _cut(s, limit=MAX_TEXT_BYTES):
    """s cut to at most limit bytes of UTF-8, at a character boundary (a
    lone surrogate counts the 3 bytes the gateway makes of it)."""
    b = s.encode("utf-8", "surrogatepass")
    if len(b) <= limit:
        return s
    return b[:limit].decode("utf-8", "ignore")


class _Heartbeat:
    """Renews a granted call's lease every heartbeat_ms while it runs, on a
    thread of its own: a lease not renewed for three heartbeats belongs to
    a dead caller."""

    def __init__(self, api, kind, name, call, heartbeat_ms):
        self.api, self.kind, self.name, self.call = api, kind, name, call
        self.every = max(heartbeat_ms, 100) / 1000
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.wait(self.every):
            try:
                self.api.call(self.kind, self.name, {"op": "heartbeat", "call": self.call})
            except Exception:
                pass  # the record that follows says whether the call still holds its row

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        return False
