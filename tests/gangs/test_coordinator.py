"""The gang coordinator: admission, holds, release all or none, time-outs, deletions."""

from __future__ import annotations

import threading

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from extender.gangs import coordinator as gc
from extender.gangs.coordinator import Decision, GangCoordinator, Member
from extender.model.podgroups import (
    API_COSCHEDULING,
    API_V1ALPHA2,
    BASIC,
    GANG,
    GroupKey,
    PodGroup,
)

KEY = GroupKey(API_V1ALPHA2, "ns", "pg1")
COS = GroupKey(API_COSCHEDULING, "ns", "job")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def group(key: GroupKey = KEY, min_count: int = 3, *, policy: str = GANG, timeout: float = 300.0) -> PodGroup:
    return PodGroup(key, "uid-" + key.name, 1, policy, min_count if policy == GANG else 1, timeout, {}, ())


def member(uid: str, key: GroupKey = KEY, *, node: str = "", scheduler: str = "extender-scheduler",
           gated: bool = False) -> Member:
    return Member(uid, f"{key.namespace}/{uid}", key, scheduler, node, gated)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def gangs(clock: Clock) -> GangCoordinator:
    return GangCoordinator(clock=clock)


def decisions(verdicts: list[gc.Verdict]) -> dict[str, Decision]:
    return {v.uid: v.decision for v in verdicts}


def test_members_wait_for_their_group_then_for_the_quorum(gangs: GangCoordinator) -> None:
    gangs.upsert_member(member("p1"))
    admission = gangs.admission("p1")
    assert (admission.admitted, admission.reason, admission.unresolvable) == (False, gc.REASON_NO_GROUP, True)
    assert "ns/pg1" in admission.message
    gangs.upsert_group(group())
    gangs.upsert_member(member("p2"))
    admission = gangs.admission("p2")
    assert (admission.admitted, admission.reason) == (False, gc.REASON_TOO_FEW)
    assert "2 of 3 members" in admission.message and "1 missing" in admission.message
    gangs.upsert_member(member("p3"))
    assert all(gangs.admission(uid).admitted for uid in ("p1", "p2", "p3"))


def test_basic_groups_wait_for_the_group_only(gangs: GangCoordinator) -> None:
    gangs.upsert_member(member("p1"))
    assert gangs.admission("p1").reason == gc.REASON_NO_GROUP
    gangs.upsert_group(group(policy=BASIC))
    assert gangs.admission("p1").admitted
    assert decisions(gangs.hold("p1", "n1")) == {"p1": Decision.ALLOW}


def test_different_scheduler_names_are_refused_with_both_names(gangs: GangCoordinator) -> None:
    gangs.upsert_group(group(min_count=2))
    gangs.upsert_member(member("p1"))
    gangs.upsert_member(member("p2", scheduler="default-scheduler"))
    admission = gangs.admission("p1")
    assert (admission.admitted, admission.reason) == (False, gc.REASON_SCHEDULER_NAMES)
    assert "'default-scheduler', 'extender-scheduler'" in admission.message
    # A member bound by another scheduler long ago does not count against the rest.
    gangs.upsert_member(member("p2", scheduler="default-scheduler", node="n1"))
    assert gangs.admission("p1").admitted


def test_gated_members_count_against_a_coscheduling_quorum_only(gangs: GangCoordinator) -> None:
    for key in (KEY, COS):
        gangs.upsert_group(group(key, 2))
        gangs.upsert_member(member(f"{key.name}-a", key))
        gangs.upsert_member(member(f"{key.name}-b", key, gated=True))
    assert gangs.admission("pg1-a").admitted  # kube-scheduler counts every known member
    assert gangs.admission("job-a").reason == gc.REASON_GATED


def three_members(gangs: GangCoordinator, key: GroupKey = KEY, min_count: int = 3) -> None:
    gangs.upsert_group(group(key, min_count))
    for i in range(1, 4):
        gangs.upsert_member(member(f"p{i}", key))


def test_held_until_the_quorum_then_all_released_together(gangs: GangCoordinator, clock: Clock) -> None:
    three_members(gangs)
    (first,) = gangs.hold("p1", "n1")
    assert (first.decision, first.reason, first.deadline) == (Decision.WAIT, gc.REASON_WAITING, clock.now + 300)
    assert "1 of 3 members placed" in first.message
    assert decisions(gangs.hold("p2", "n2")) == {"p2": Decision.WAIT}
    status = gangs.status(KEY)
    assert (status.held, status.missing, status.waiting_since) == (2, 1, clock.now)
    released = gangs.hold("p3", "n1")
    assert decisions(released) == {"p1": Decision.ALLOW, "p2": Decision.ALLOW, "p3": Decision.ALLOW}
    assert {v.uid: v.node for v in released} == {"p1": "n1", "p2": "n2", "p3": "n1"}
    assert (gangs.status(KEY).allowed, gangs.status(KEY).held, gangs.next_deadline()) == (3, 0, None)


def test_extra_members_join_a_complete_group_at_once(gangs: GangCoordinator) -> None:
    three_members(gangs)
    for uid in ("p1", "p2", "p3"):
        gangs.hold(uid, "n1")
        gangs.upsert_member(member(uid, node="n1"))  # the watch delivers the binds
    gangs.upsert_member(member("p4"))
    assert gangs.status(KEY).bound == 3
    assert decisions(gangs.hold("p4", "n2")) == {"p4": Decision.ALLOW}


def test_a_bound_member_can_complete_the_quorum(gangs: GangCoordinator) -> None:
    three_members(gangs)
    gangs.hold("p1", "n1")
    gangs.hold("p2", "n1")
    verdicts = gangs.upsert_member(member("p3", node="n9"))  # bound by someone else
    assert decisions(verdicts) == {"p1": Decision.ALLOW, "p2": Decision.ALLOW}


def test_a_hold_that_runs_out_sends_the_whole_group_back(gangs: GangCoordinator, clock: Clock) -> None:
    three_members(gangs)
    gangs.hold("p1", "n1")
    clock.now += 100
    gangs.hold("p2", "n2")
    assert gangs.next_deadline() == 1300.0
    clock.now = 1299.0
    assert gangs.expire() == []
    clock.now = 1300.0
    verdicts = gangs.expire()
    assert decisions(verdicts) == {"p1": Decision.REJECT, "p2": Decision.REJECT}
    assert {v.reason for v in verdicts} == {gc.REASON_TIMEOUT}
    assert "2 of 3 members placed" in verdicts[0].message
    assert (gangs.status(KEY).held, gangs.next_deadline()) == (0, None)
    # Retried later, they start afresh.
    assert decisions(gangs.hold("p1", "n1")) == {"p1": Decision.WAIT}


def test_hold_limit_caps_the_groups_timeout(clock: Clock) -> None:
    gangs = GangCoordinator(clock=clock, hold_limit=25.0)
    three_members(gangs)
    assert gangs.hold("p1", "n1")[0].deadline == clock.now + 25.0
    gangs.upsert_group(group(COS, 2, timeout=10.0))
    gangs.upsert_member(member("c1", COS))
    assert gangs.hold("c1", "n1")[0].deadline == clock.now + 10.0
    with pytest.raises(ValueError, match="hold_limit"):
        GangCoordinator(hold_limit=0)


def test_deleting_the_group_releases_its_held_members(gangs: GangCoordinator) -> None:
    three_members(gangs)
    gangs.hold("p1", "n1")
    verdicts = gangs.delete_group(KEY)
    assert decisions(verdicts) == {"p1": Decision.REJECT} and verdicts[0].reason == gc.REASON_DELETED
    assert gangs.admission("p1").reason == gc.REASON_NO_GROUP
    rejected = gangs.hold("p2", "n1")
    assert decisions(rejected) == {"p2": Decision.REJECT} and rejected[0].reason == gc.REASON_NO_GROUP
    assert gangs.delete_group(GroupKey(API_V1ALPHA2, "ns", "other")) == []


def test_a_held_member_deleted_leaves_the_others_waiting_in_v1alpha2(gangs: GangCoordinator) -> None:
    three_members(gangs)
    gangs.hold("p1", "n1")
    gangs.hold("p2", "n1")
    assert gangs.delete_member("p1") == []
    assert (gangs.status(KEY).held, gangs.status(KEY).members) == (1, 2)
    assert gangs.delete_member("nobody") == []


def test_a_held_member_leaving_rejects_its_coscheduling_siblings(gangs: GangCoordinator) -> None:
    three_members(gangs, COS)
    gangs.hold("p1", "n1")
    gangs.hold("p2", "n1")
    verdicts = gangs.delete_member("p1")
    assert decisions(verdicts) == {"p2": Decision.REJECT} and verdicts[0].reason == gc.REASON_SIBLING
    gangs.hold("p2", "n1")
    verdicts = gangs.withdraw("p2", "another plugin refused")
    assert verdicts == []  # the only held one gave up: nobody else to reject
    gangs.hold("p2", "n1")
    gangs.hold("p3", "n2")
    verdicts = gangs.withdraw("p3", "bind failed")
    assert decisions(verdicts) == {"p2": Decision.REJECT} and "bind failed" in verdicts[0].message


def test_withdrawing_an_allowed_member_undoes_nothing_else(gangs: GangCoordinator) -> None:
    three_members(gangs)
    for uid in ("p1", "p2", "p3"):
        gangs.hold(uid, "n1")
    assert gangs.withdraw("p3", "bind failed") == []
    status = gangs.status(KEY)
    assert (status.allowed, status.missing) == (2, 1)
    assert [m.uid for m in gangs.to_place(KEY)] == ["p3"]
    # Placed again, it completes the group at once: the two allowed members count.
    assert decisions(gangs.hold("p3", "n2")) == {"p3": Decision.ALLOW}
    assert gangs.withdraw("unknown", "x") == []


def test_quorum_with_and_to_place(gangs: GangCoordinator) -> None:
    assert not gangs.quorum_with(KEY, 5)
    three_members(gangs)
    gangs.hold("p1", "n1")
    assert [m.uid for m in gangs.to_place(KEY)] == ["p2", "p3"]
    assert not gangs.quorum_with(KEY, 1) and gangs.quorum_with(KEY, 2)
    gangs.upsert_group(group(policy=BASIC))
    assert gangs.quorum_with(KEY, 0)
    assert gangs.to_place(GroupKey(API_V1ALPHA2, "ns", "none")) == []
    assert gangs.group_of("p1") == group(policy=BASIC) and gangs.group_of("zz") is None


def test_a_policy_change_releases_held_members(gangs: GangCoordinator) -> None:
    three_members(gangs)
    gangs.hold("p1", "n1")
    assert decisions(gangs.upsert_group(group(min_count=1))) == {"p1": Decision.ALLOW}


def test_describe_says_group_quorum_and_what_a_member_waits_for(gangs: GangCoordinator) -> None:
    assert gangs.describe("nobody") == []
    gangs.upsert_member(member("p1"))
    assert gangs.describe("p1") == [f"member of pod group ns/pg1 ({API_V1ALPHA2})",
                                    "waits for: the pod group to exist"]
    gangs.upsert_group(group())
    assert gangs.describe("p1")[1:] == ["policy: gang, minCount 3; members 1, bound 0, held 0, allowed 0",
                                        "waits for: pod group ns/pg1 has 1 of 3 members (minCount 3); 2 missing"]
    gangs.upsert_member(member("p2"))
    gangs.upsert_member(member("p3"))
    gangs.hold("p1", "n1")
    assert gangs.describe("p2")[1:] == ["policy: gang, minCount 3; members 3, bound 0, held 1, allowed 0",
                                        "waits for: 2 more member(s) placed (held members wait up to 300 s)"]
    gangs.upsert_group(group(policy=BASIC))
    assert gangs.describe("p2")[1:] == ["policy: basic (no quorum); members 3, bound 0, held 0, allowed 1"]


def test_unknown_members_are_a_programming_error(gangs: GangCoordinator) -> None:
    with pytest.raises(KeyError):
        gangs.admission("nobody")
    with pytest.raises(KeyError):
        gangs.hold("nobody", "n1")


def test_asked_again_an_allowed_member_gets_the_same_answer(gangs: GangCoordinator) -> None:
    three_members(gangs, min_count=1)
    assert decisions(gangs.hold("p1", "n1")) == {"p1": Decision.ALLOW}
    assert gangs.hold("p1", "n7")[0].node == "n1"


def test_a_member_recreated_in_another_group_leaves_the_first(gangs: GangCoordinator) -> None:
    three_members(gangs)
    gangs.upsert_member(member("p1", COS))
    assert (gangs.status(KEY).members, gangs.status(COS).members) == (2, 1)


def test_waiting_threads_get_their_verdicts(gangs: GangCoordinator) -> None:
    three_members(gangs)
    results: dict[str, gc.Verdict | None] = {}

    def bind(uid: str) -> None:
        if gangs.hold(uid, "n1")[-1].decision is Decision.WAIT:
            results[uid] = gangs.wait(uid, timeout=10.0)

    threads = [threading.Thread(target=bind, args=(uid,)) for uid in ("p1", "p2")]
    for thread in threads:
        thread.start()
    while gangs.status(KEY).held < 2:
        threading.Event().wait(0.001)
    gangs.hold("p3", "n1")
    for thread in threads:
        thread.join(10)
    assert {uid: v.decision if v else None for uid, v in results.items()} == {"p1": Decision.ALLOW,
                                                                               "p2": Decision.ALLOW}
    assert gangs.wait("p3", timeout=0.0) is not None  # posted too, for a caller that waits
    assert gangs.wait("p3", timeout=0.01) is None  # consumed


# --- properties: whatever happens, a gang is released whole, and every hold is decided once ------

GROUPS = {KEY: 3, COS: 2}
UIDS = [f"{key.name}-{i}" for key in GROUPS for i in range(4)]
KEY_OF = {uid: key for key in GROUPS for uid in UIDS if uid.startswith(key.name)}

holds = st.tuples(st.just("hold"), st.sampled_from(UIDS))
operations = st.one_of(
    holds, holds, holds,
    st.tuples(st.just("group"), st.sampled_from(list(GROUPS)), st.sampled_from([GANG, GANG, BASIC])),
    st.tuples(st.just("ungroup"), st.sampled_from(list(GROUPS))),
    st.tuples(st.just("member"), st.sampled_from(UIDS), st.booleans()),
    st.tuples(st.just("bind"), st.sampled_from(UIDS)),
    st.tuples(st.just("delete"), st.sampled_from(UIDS)),
    st.tuples(st.just("withdraw"), st.sampled_from(UIDS)),
    st.tuples(st.just("tick"), st.floats(0, 400)),
    st.tuples(st.just("expire")),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(operations, max_size=60))
def test_no_gang_is_ever_released_in_part(ops: list[tuple]) -> None:
    clock = Clock()
    gangs = GangCoordinator(clock=clock)
    known: set[str] = set(UIDS)
    policies: dict[GroupKey, str] = dict.fromkeys(GROUPS, GANG)
    for key, min_count in GROUPS.items():
        gangs.upsert_group(group(key, min_count))
    for uid in UIDS:
        gangs.upsert_member(member(uid, KEY_OF[uid]))
    released: set[str] = set()  # members allowed and not sent back, withdrawn, deleted or bound since
    bound: set[str] = set()
    gated: set[str] = set()
    for op in ops:
        before = set(released)
        verdicts: list[gc.Verdict] = []
        if op[0] == "group":
            policies[op[1]] = op[2]
            verdicts = gangs.upsert_group(group(op[1], GROUPS[op[1]], policy=op[2]))
        elif op[0] == "ungroup":
            policies.pop(op[1], None)
            verdicts = gangs.delete_group(op[1])
        elif op[0] == "member":
            known.add(op[1])
            verdicts = gangs.upsert_member(member(op[1], KEY_OF[op[1]], gated=op[2]))
        elif op[0] == "bind" and op[1] in known:
            verdicts = gangs.upsert_member(member(op[1], KEY_OF[op[1]], node="n1"))
        elif op[0] == "delete":
            known.discard(op[1])
            verdicts = gangs.delete_member(op[1])
        elif op[0] == "hold" and op[1] in known:
            verdicts = gangs.hold(op[1], "n1")
            assert op[1] in {v.uid for v in verdicts}, "a hold always answers for its own member"
        elif op[0] == "withdraw":
            verdicts = gangs.withdraw(op[1], "gave up")
        elif op[0] == "tick":
            clock.now += op[1]
        elif op[0] == "expire":
            verdicts = gangs.expire()
            deadline = gangs.next_deadline()
            assert deadline is None or deadline > clock.now

        event(f"{op[0]}: {sorted({v.decision.value for v in verdicts})}")
        if op[0] in ("bind", "delete", "withdraw"):
            released.discard(op[1])
        if op[0] == "member":
            bound.discard(op[1])
            (gated.add if op[2] else gated.discard)(op[1])
        elif op[0] == "bind" and op[1] in known:
            bound.add(op[1])
        elif op[0] == "delete":
            bound.discard(op[1])
            gated.discard(op[1])
        for verdict in verdicts:
            (released.add if verdict.decision is Decision.ALLOW else released.discard)(verdict.uid)
        uids = [v.uid for v in verdicts]
        assert len(uids) == len(set(uids)), f"one verdict per member per call: {verdicts}"
        for key, min_count in GROUPS.items():
            status = gangs.status(key)
            mine = {uid for uid in known if KEY_OF[uid] == key}
            assert (status.members, status.bound) == (len(mine), len(mine & bound)), "counts drifted"
            if policies.get(key) == GANG and key.api == API_COSCHEDULING and len(mine) >= min_count:
                unbound_gated = len((mine & gated) - bound)
                assert gangs.admission(next(iter(mine))).admitted == (len(mine) - unbound_gated >= min_count)
            # (An allowed member asked again gets the same answer: not a new release.)
            allowed_now = [v for v in verdicts
                           if v.decision is Decision.ALLOW and KEY_OF[v.uid] == key and v.uid not in before]
            if allowed_now and policies.get(key) == GANG:
                # Released only whole: nobody of the group is left held, and the quorum is there.
                assert status.held == 0, (key, status, verdicts)
                assert status.scheduled >= min_count, (key, status, verdicts)
            if status.held and policies.get(key) == GANG:
                assert status.scheduled < min_count, f"{key} held members past its quorum: {status}"
            if policies.get(key) != GANG:
                assert status.held == 0, f"{key} holds members without being a gang: {status}"
