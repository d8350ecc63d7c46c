"""Stateful property test of the receipt state machine (hypothesis).

No sequence of admit / retried admit / commit / mark_uncertain / owner_died / reconcile / store restart
ever yields REPLAY for an uncommitted operation or NEW for an operation that was already admitted.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from geode.home import GeodeHome
from geode.protocol.errors import Conflict, NotFound
from geode.records.models import AdmitKind, ReceiptIdentity
from tests.records.harness import LocalStore, local_store

OPS = {  # op id -> (session, step)
    "op0": ("s0", "st0"),
    "op1": ("s0", "st0"),
    "op2": ("s0", "st1"),
    "op3": ("s1", "st0"),
}
op_ids = st.sampled_from(sorted(OPS))
owners = st.sampled_from(["executor#1", "executor#2", "executor#3"])


def identity(op: str, fp: str = "f") -> ReceiptIdentity:
    session, step = OPS[op]
    return ReceiptIdentity(session_id=session, turn_id="t", step_id=step, tool_name="write", fingerprint=fp)


class ReceiptMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="geode-rsm-"))
        self.home = GeodeHome(self.dir).ensure()
        self.store: LocalStore = local_store(self.home)
        self.state: dict[str, str] = {}  # op -> admitted | uncertain | committed | reconciled:<outcome>
        self.owner: dict[str, str] = {}
        self.token: dict[str, str] = {}
        self.tokens = 0

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _quarantined(self, op: str) -> bool:
        session, step = OPS[op]
        return any(
            OPS[o][0] == session and OPS[o][1] != step and s in ("admitted", "uncertain")
            for o, s in self.state.items()
        )

    def _check_admit(self, op: str, owner: str, token: str) -> None:
        before = self.state.get(op)
        r = self.store.client.admit(op, identity(op), owner=owner, effect="write", attempt=token)
        if r.kind == AdmitKind.REPLAY:
            assert before is not None and (before == "committed" or before.startswith("reconciled"))
        if r.kind == AdmitKind.NEW:
            same_admission = (
                before == "admitted" and self.token.get(op) == token and self.owner.get(op) == owner
            )
            assert before is None or same_admission, f"NEW for an op in state {before}"
        if before is None:
            expected = AdmitKind.UNCERTAIN if self._quarantined(op) else AdmitKind.NEW
            assert r.kind == expected
            if r.kind == AdmitKind.NEW:
                self.state[op], self.owner[op], self.token[op] = "admitted", owner, token
        elif before in ("admitted", "uncertain"):
            assert r.kind in (AdmitKind.UNCERTAIN, AdmitKind.NEW)
        else:
            assert r.kind == AdmitKind.REPLAY

    @rule(op=op_ids, owner=owners)
    def admit_fresh_attempt(self, op: str, owner: str) -> None:
        self.tokens += 1
        self._check_admit(op, owner, f"tok{self.tokens}")

    @precondition(lambda self: bool(self.token))
    @rule(op=op_ids)
    def retry_lost_admit_reply(self, op: str) -> None:
        if op in self.token:
            self._check_admit(op, self.owner[op], self.token[op])

    @rule(op=op_ids)
    def admit_with_other_identity(self, op: str) -> None:
        if op in self.state:
            r = self.store.client.admit(op, identity(op, fp="other"), owner="executor#1", attempt="x")
            assert r.kind == AdmitKind.CONFLICT

    @rule(op=op_ids)
    def commit(self, op: str) -> None:
        before = self.state.get(op)
        try:
            self.store.client.commit(op, {"result_of": op})
        except NotFound:
            assert before is None
            return
        except Conflict:
            assert before is not None and before.startswith("reconciled")
            return
        assert before in ("admitted", "uncertain", "committed")
        self.state[op] = "committed"

    @rule(op=op_ids)
    def mark_uncertain(self, op: str) -> None:
        before = self.state.get(op)
        try:
            self.store.client.mark_uncertain(op, "deadline")
        except NotFound:
            assert before is None
            return
        if before == "admitted":
            self.state[op] = "uncertain"

    @rule(inc=st.integers(1, 3))
    def owner_died(self, inc: int) -> None:
        n = self.store.client.owner_died("executor", inc)
        victims = [
            o for o, s in self.state.items() if s == "admitted" and int(self.owner[o].split("#")[1]) <= inc
        ]
        assert n == len(victims)
        for o in victims:
            self.state[o] = "uncertain"

    @rule(op=op_ids, outcome=st.sampled_from(["applied", "not_applied"]))
    def reconcile(self, op: str, outcome: str) -> None:
        before = self.state.get(op)
        try:
            r = self.store.client.reconcile(op, outcome=outcome, by="operator")
        except NotFound:
            assert before is None
            return
        except Conflict:
            assert before == "committed" or (
                before is not None and before.startswith("reconciled:") and before != f"reconciled:{outcome}"
            )
            return
        assert before in ("admitted", "uncertain", f"reconciled:{outcome}") and r.outcome == outcome
        self.state[op] = f"reconciled:{outcome}"

    @rule()
    def restart_store(self) -> None:
        self.store.close()
        self.store = local_store(self.home)

    @invariant()
    def store_matches_model(self) -> None:
        for op in OPS:
            r = self.store.client.get_receipt(op)
            want = self.state.get(op)
            if want is None:
                assert r is None
            else:
                assert r is not None and r.state.value == want.split(":")[0]


ReceiptMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
test_receipt_state_machine = pytest.mark.timeout(300)(ReceiptMachine.TestCase)
