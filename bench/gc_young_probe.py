"""What the collector's long young passes walk: ``bench/monitor_loop_stalls.py`` run under a probe.

    PYTHONPATH=<tree> .venv/bin/python bench/gc_young_probe.py [monitor_loop_stalls arguments]
    e.g. ... bench/gc_young_probe.py --seconds 0 --live 40 --pin --broker-dir DIR

At the start of every generation-0 and generation-1 pass the probe lists the objects of the generations the pass
walks (``gc.get_objects``): how many, the largest containers by length, the most numerous types; after the pass,
for those over 20 ms of the thread's CPU, it keeps that list, and prints them all at the end. The probe's own
listing happens before the pass's clock starts, but it slows the process: its other figures are not comparable
with a plain run's.
"""

from __future__ import annotations

import collections
import gc
import runpy
import sys
import threading
import time
from typing import Any

LONG_S = 0.020
long_passes: list[tuple[float, int, str, Any]] = []
state: dict[str, Any] = {}


def probe(phase: str, info: dict[str, int]) -> None:
    generation = info["generation"]
    if generation == 2:
        return
    if phase == "start":
        objects: list[Any] = []
        for walked in range(generation + 1):
            objects += gc.get_objects(generation=walked)
        largest = []
        for item in objects:
            try:
                length = len(item)
            except Exception:  # noqa: BLE001, S112 - most objects have no length
                continue
            if length > 1000:
                largest.append((length, type(item).__qualname__))
        largest.sort(reverse=True)
        kinds = collections.Counter(type(item).__qualname__ for item in objects).most_common(6)
        state["what"] = (len(objects), largest[:5], kinds)
        del objects
        state["started"] = time.thread_time()
    elif "started" in state:
        spent = time.thread_time() - state.pop("started")
        if spent > LONG_S:
            long_passes.append((round(spent * 1000, 1), generation, threading.current_thread().name, state["what"]))


def main() -> None:
    gc.callbacks.append(probe)
    script = "bench/monitor_loop_stalls.py"
    sys.argv = [script, *sys.argv[1:]]
    sys.path.insert(0, "bench")
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit:
        pass
    finally:
        gc.callbacks.remove(probe)
        print(f"young passes over {LONG_S * 1000:.0f} ms of CPU: {len(long_passes)} (ms, generation, thread, "
              "(objects walked, the largest containers, the most numerous types))")
        for item in long_passes:
            print(item)


if __name__ == "__main__":
    main()
