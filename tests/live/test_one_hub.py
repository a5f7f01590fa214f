"""The facade starts one live hub, however many workers ask for it at once (the cockpit's first GPU,
pod and subscribe calls arrive together: profiling the idle cockpit found three hubs, each with its
own health and metrics threads)."""

from __future__ import annotations

import threading


def test_concurrent_first_reads_start_one_hub(monkeypatch):
    import backend.live as live
    from c3.services_real import RealServices

    started: list[object] = []
    gate = threading.Barrier(8)

    class CountingHub:
        def __init__(self, *args, **kwargs) -> None:
            gate_wait()
            started.append(self)

        def start(self) -> None:
            pass

    def gate_wait() -> None:  # hold the first constructor until every caller is inside `_live`
        try:
            gate.wait(timeout=0.5)
        except threading.BrokenBarrierError:
            pass

    monkeypatch.setattr(live, "LiveState", CountingHub)
    monkeypatch.setenv("C3_RIG", "demo")
    monkeypatch.setenv("C3_RUNTIME", "sim")
    svc = RealServices(demo=True)
    hubs: list[object] = []
    threads = [threading.Thread(target=lambda: hubs.append(svc.live._live())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(started) == 1 and len(hubs) == 8 and all(h is started[0] for h in hubs)
