"""Stand-in engines (plain Python serving /health with http.server, not vLLM) and a spy on the
order in which pdctl.local.supervisor starts them: the real `launch` and `answers` still run, each
call noted. What it leaves out: everything an engine does but answer its readiness path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pdctl.local import layout, supervisor


def engine(name: str, role: str, folder: Path, gpus: str | None = None) -> layout.Process:
    """A stand-in engine answering /health on a free port; `gpus`: its CUDA_VISIBLE_DEVICES."""
    port = layout.free_port()
    (folder / "health").write_text("ok")
    server = (
        "import functools, http.server as h; "
        f"handler = functools.partial(h.SimpleHTTPRequestHandler, directory={str(folder)!r}); "
        f"h.HTTPServer(('127.0.0.1', {port}), handler).serve_forever()"
    )
    env = {} if gpus is None else {layout.GPU_ENV: gpus}
    return layout.Process(name, role, [sys.executable, "-c", server], env, port)


class StartOrder:
    """The events of a start, in order: "launch NAME" as a process is launched, "ready NAME" the
    first time it answers its readiness path."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, processes: list[layout.Process]) -> None:
        self.events: list[str] = []
        names = {p.url + p.ready_path: p.name for p in processes}
        launch, answers = supervisor.launch, supervisor.answers

        def noted_launch(proc: layout.Process, *args: object, **kwargs: object) -> object:
            self.events.append(f"launch {proc.name}")
            return launch(proc, *args, **kwargs)  # type: ignore[arg-type]

        def noted_answers(url: str) -> bool:
            ready = answers(url)
            if ready and f"ready {names[url]}" not in self.events:
                self.events.append(f"ready {names[url]}")
            return ready

        monkeypatch.setattr(supervisor, "launch", noted_launch)
        monkeypatch.setattr(supervisor, "answers", noted_answers)
