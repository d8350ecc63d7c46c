"""Properties of the rewrite rule: a rewrite passes only if it keeps or strengthens every safety dimension."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from geode.tools.policy import PolicyDenial, check_monotonic
from geode.tools.spec import ApprovalMode, DataClass, EffectClass, SafetyPolicy, ToolSpec

RANK = {ApprovalMode.NONE: 0, ApprovalMode.CACHED: 1, ApprovalMode.PER_INVOCATION: 2}

policies = st.builds(
    SafetyPolicy,
    effect=st.sampled_from(list(EffectClass)),
    data_class=st.sampled_from(list(DataClass)),
    approval=st.sampled_from(list(ApprovalMode)),
    allow_headless=st.booleans(),
    allow_subagents=st.booleans(),
    resource_strategy=st.just("global:x"),
    denied=st.booleans(),
)


def _spec(name: str, p: SafetyPolicy) -> ToolSpec:
    return ToolSpec(name=name, description=name, handler=f"x:{name}", policy=p)


def _weakens(a: SafetyPolicy, b: SafetyPolicy) -> bool:
    return (
        (a.data_class is DataClass.PERSONAL and b.data_class is DataClass.PUBLIC)
        or RANK[b.approval] < RANK[a.approval]
        or (a.effect is not EffectClass.READ and b.effect is not a.effect)
        or (b.allow_headless and not a.allow_headless)
        or (b.allow_subagents and not a.allow_subagents)
        or (a.denied and not b.denied)
    )


@given(policies, policies)
def test_rewrite_allowed_iff_nothing_weakens(a: SafetyPolicy, b: SafetyPolicy) -> None:
    try:
        check_monotonic(_spec("old", a), _spec("new", b))
        allowed = True
    except PolicyDenial as exc:
        allowed = False
        if a.data_class is DataClass.PERSONAL and b.data_class is DataClass.PUBLIC:
            assert exc.error_type == "privacy_classification_downgrade"
        else:
            assert exc.error_type == "tool_policy_downgrade"
    assert allowed == (not _weakens(a, b))


@given(policies)
def test_identity_rewrite_always_allowed(a: SafetyPolicy) -> None:
    check_monotonic(_spec("t", a), _spec("t", a))
