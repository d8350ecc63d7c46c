"""The outcome vocabulary of a scheduled occurrence (DESIGN §9) and its legal transitions.

An occurrence is recorded ``due`` before its job's next instant advances, may pass through ``delivering``
(its reply is deferred, e.g. a long rate limit) and ends in exactly one terminal outcome: ``done`` (ok |
error, with the turn's termination reason), ``delivery_failed`` (a permanent refusal), ``uncertain`` (its
reply's receipt is uncertain), ``skipped`` (overlap policy) or ``missed`` (catch-up policy; one range row per
job and downtime window, never one row per instant). ``uncertain`` is terminal until its receipt is
reconciled (by an operator or by observation): the occurrence then follows the receipt, and the history keeps
the ``uncertain`` it came from.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from geode.protocol.errors import ErrorCode, GeodeError
from geode.protocol.turns import SUCCESS_REASONS

REASON_MAX = 500  # one line: a termination reason, a platform's refusal, why a receipt is uncertain


class IllegalTransition(GeodeError):
    """An outcome write that the occurrence contract forbids (e.g. a second terminal outcome)."""

    code = ErrorCode.CONFLICT


class OutcomeKind(StrEnum):
    DUE = "due"
    DELIVERING = "delivering"
    DONE = "done"
    DELIVERY_FAILED = "delivery_failed"
    UNCERTAIN = "uncertain"
    SKIPPED = "skipped"
    MISSED = "missed"


TERMINAL = frozenset(
    {
        OutcomeKind.DONE,
        OutcomeKind.DELIVERY_FAILED,
        OutcomeKind.UNCERTAIN,
        OutcomeKind.SKIPPED,
        OutcomeKind.MISSED,
    }
)
Reconciler = Literal["operator", "observation"]
Reason = Annotated[str, Field(min_length=1, max_length=REASON_MAX, pattern=r"^[^\r\n]*$")]


class _Outcome(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Due(_Outcome):
    """Recorded before the job's next instant advances; the turn is (or is about to be) submitted."""

    kind: Literal["due"] = "due"


class Delivering(_Outcome):
    """The turn is done and its reply is deferred (``reason``: e.g. the platform's rate limit)."""

    kind: Literal["delivering"] = "delivering"
    reason: Reason


class Done(_Outcome):
    """The turn ended (``reason``: its termination reason) and its reply, if any, was posted."""

    kind: Literal["done"] = "done"
    result: Literal["ok", "error"]
    reason: Reason
    reconciled: Reconciler | None = None  # set when this follows an ``uncertain`` receipt's reconciliation


class DeliveryFailed(_Outcome):
    """The delivery chat refused the reply permanently (``reason``: the platform's refusal)."""

    kind: Literal["delivery_failed"] = "delivery_failed"
    reason: Reason
    reconciled: Reconciler | None = None


class Uncertain(_Outcome):
    """The reply's receipt is uncertain: an incarnation admitted the post and died before its commit."""

    kind: Literal["uncertain"] = "uncertain"
    reason: Reason
    operation_id: str = Field(min_length=1, max_length=256)  # the reply's receipt an operator reconciles


class Skipped(_Outcome):
    """Not run: the overlap policy refused it while an earlier occurrence of the job was running."""

    kind: Literal["skipped"] = "skipped"
    reason: Reason = "overlap"


class Missed(_Outcome):
    """Instants of one downtime window the catch-up policy did not run: one row per job and window."""

    kind: Literal["missed"] = "missed"
    count: int = Field(ge=1)
    first: AwareDatetime
    last: AwareDatetime
    reason: Reason = "catch_up"

    @model_validator(mode="after")
    def _ordered(self) -> Missed:
        if self.last < self.first or (self.count == 1) != (self.first == self.last):
            raise ValueError(f"a missed range of {self.count} runs first..last ({self.first}..{self.last})")
        return self


Outcome = Annotated[
    Due | Delivering | Done | DeliveryFailed | Uncertain | Skipped | Missed, Field(discriminator="kind")
]

# What may follow what. A ``missed`` range and a ``skipped`` occurrence are written as their first and only
# outcome; ``due`` is the start of every occurrence that runs.
_NEXT: dict[OutcomeKind | None, frozenset[OutcomeKind]] = {
    None: frozenset({OutcomeKind.DUE, OutcomeKind.SKIPPED, OutcomeKind.MISSED}),
    OutcomeKind.DUE: frozenset(
        {
            OutcomeKind.DELIVERING,
            OutcomeKind.DONE,
            OutcomeKind.DELIVERY_FAILED,
            OutcomeKind.UNCERTAIN,
            OutcomeKind.SKIPPED,
        }
    ),
    OutcomeKind.DELIVERING: frozenset(
        {OutcomeKind.DELIVERING, OutcomeKind.DONE, OutcomeKind.DELIVERY_FAILED, OutcomeKind.UNCERTAIN}
    ),
    OutcomeKind.UNCERTAIN: frozenset({OutcomeKind.DONE, OutcomeKind.DELIVERY_FAILED}),
}


def kind_of(outcome: Outcome | None) -> OutcomeKind | None:
    return None if outcome is None else OutcomeKind(outcome.kind)


def is_terminal(outcome: Outcome | None) -> bool:
    return kind_of(outcome) in TERMINAL


def check_transition(current: Outcome | None, new: Outcome) -> bool:
    """Whether writing ``new`` over ``current`` changes the occurrence: ``False`` for an identical repeat (a
    retried write, nothing to do), ``True`` for a legal step; :class:`IllegalTransition` otherwise (a
    second terminal outcome, a step back to ``due``, an ``uncertain`` that follows nothing reconciled)."""
    if current == new:
        return False
    old, nxt = kind_of(current), OutcomeKind(new.kind)
    if nxt not in _NEXT.get(old, frozenset()):
        was = "nothing" if old is None else old.value
        raise IllegalTransition(f"an occurrence at {was} cannot become {nxt.value}")
    reconciled = getattr(new, "reconciled", None)
    if old is OutcomeKind.UNCERTAIN and reconciled is None:
        raise IllegalTransition(f"an uncertain occurrence becomes {nxt.value} only by a reconciled receipt")
    if old is not OutcomeKind.UNCERTAIN and reconciled is not None:
        raise IllegalTransition(f"only an uncertain occurrence is reconciled (this one is {old})")
    return True


def follow(history: tuple[Outcome, ...], new: Outcome) -> tuple[Outcome, ...]:
    """The occurrence's outcomes after ``new`` (oldest first; the last is its outcome now); an identical
    repeat leaves them as they are."""
    return (*history, new) if check_transition(history[-1] if history else None, new) else history


def done_for(termination_reason: str) -> Done:
    """The ``done`` of a turn that ended with ``termination_reason`` (ok for natural and forced text)."""
    ok = termination_reason in {r.value for r in SUCCESS_REASONS}
    return Done(result="ok" if ok else "error", reason=termination_reason)


def counts_as_failure(outcome: Outcome) -> bool | None:
    """For failure backoff: ``True`` a failure, ``False`` a success that resets the count, ``None`` neither
    (not terminal, skipped, missed, or uncertain: nobody knows yet)."""
    if isinstance(outcome, Done):
        return outcome.result == "error"
    if isinstance(outcome, DeliveryFailed):
        return True
    return None
