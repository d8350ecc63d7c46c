"""`geode status` on main: the hosts list merges lanes' remote loop workers and the executor's tool.hosts."""

from __future__ import annotations

from actors.cli.hosts_view import hosts_detail, hosts_lines


def test_hosts_merge_loop_workers_and_executors_by_host() -> None:
    lanes = {
        "workers": [
            {"worker": "loop-1", "incarnation": 1, "capacity": 2, "running": [], "last_seen_s": 0.1},
            {
                "worker": "w1/loop-1",
                "incarnation": 4,
                "capacity": 2,
                "running": ["t-1"],
                "last_seen_s": 0.7,
                "address": "10.77.0.2",
            },
        ]
    }
    executors = [
        {
            "host": "w2",
            "address": "10.77.0.3",
            "name": "w2/executor",
            "incarnation": 2,
            "state": "lost",
            "last_seen_s": 3.4,
            "effects_in_flight": 1,
            "roots": ["/srv/a"],
        },
    ]
    hosts = hosts_detail(lanes, executors)
    assert [h["host"] for h in hosts] == ["w1", "w2"]
    assert hosts[0]["children"] == [
        {
            "name": "w1/loop-1",
            "kind": "loop",
            "incarnation": 4,
            "last_heartbeat_s": 0.7,
            "capacity": 2,
            "turns_in_flight": ["t-1"],
        }
    ]
    assert (
        hosts[0]["address"] == "10.77.0.2"
        and hosts[1]["address"] == "10.77.0.3"
        and hosts[1]["children"][0]["state"] == "lost"
    )
    text = "\n".join(hosts_lines(hosts))
    assert "w1/loop-1#4 loop · heartbeat 0.7s ago · 1/2 turns in flight" in text
    assert "w2 (10.77.0.3)" in text
    assert "w2/executor#2 executor · heartbeat 3.4s ago · lost · 1 effects" in text


def test_no_worker_hosts_no_lines() -> None:
    assert hosts_detail({"workers": [{"worker": "loop-1"}]}, []) == [] and hosts_lines([]) == []
