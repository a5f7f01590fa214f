"""The new pod's port rule (backend/estate/ports.py), one for the cockpit's form and the estate."""

from __future__ import annotations

from backend.estate.ports import new_pod_port_problem


def test_a_typed_port_must_be_a_port_not_another_pods_nor_bound_here():
    taken = {8020: "chat"}
    bound = {8100}
    asked: list[int] = []

    def is_bound(port: int) -> bool:
        asked.append(port)
        return port in bound

    for text in ("", "0", "65536", "80a", "-1", "8\u00b2", "\u0668\u0660\u0660\u0660", "9" * 5000):  # 8², Arabic-Indic 8000, past int()'s digit cap
        assert new_pod_port_problem(text, taken, is_bound=is_bound) == "port: a number from 1 to 65535"
    assert new_pod_port_problem(" 8020 ", taken, is_bound=is_bound) == "port 8020 is pod chat's"
    assert new_pod_port_problem("8100", taken, is_bound=is_bound) == "port 8100 is in use on this machine"
    assert new_pod_port_problem("8101", taken, is_bound=is_bound) is None
    assert asked == [8100, 8101]  # only a real, untaken port is bound to


def test_without_the_host_check_nothing_binds():
    assert new_pod_port_problem("8100", {}, is_bound=None) is None
