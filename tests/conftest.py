"""Fixtures: the pinned helm binaries, a render cache, the Kubernetes API double; and the hook
that marks each test with its module's tier (tests/tiers.py). Helpers are in tests/helpers.py.

The binaries are looked up in the tools folder through pdctl.helm.tools_dirs(), so
$PDCTL_TOOLS_DIR points the suite at another one; a missing version fails the tests that need it
("run `make helm`"). Nothing runs helm at collection time.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pytest

from pdctl import manifests
from pdctl.helm import Helm
from tests import tiers
from tests.doubles.kube_api import KubeAPIDouble, serving
from tests.helpers import HELM_VERSIONS, Render, pinned_helm, render_file

MISPLACED = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test gets its module's tier as a mark; a module in no tier, or a test that uses a
    fixture beyond its module's tier, fails (at setup, with the reason)."""
    for item in items:
        try:
            tier = tiers.tier(item.path.stem)
        except tiers.TierError as error:
            item.stash[MISPLACED] = str(error)
            continue
        item.add_marker(getattr(pytest.mark, tier))
        why = tiers.misplaced(tier, list(getattr(item, "fixturenames", [])))
        if why:
            item.stash[MISPLACED] = why


def pytest_runtest_setup(item: pytest.Item) -> None:
    if MISPLACED in item.stash:
        pytest.fail(item.stash[MISPLACED], pytrace=False)


@pytest.fixture(scope="session", autouse=True)
def own_homes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """helm's cache, config and data folders, matplotlib's, and the state folder of `pdctl up`'s
    local releases in this session's temporary folder, never the user's (~/.cache/helm,
    ~/.config/helm, ~/.local/share/helm, ~/.cache/matplotlib, ~/.local/state/pdctl), which a
    suite running at the same time in another checkout would share, and where a release the
    user started with `pdctl up` would answer the tests' verify, bench and status."""
    base = tmp_path_factory.mktemp("homes")
    with pytest.MonkeyPatch.context() as patch:
        for name in ("CACHE", "CONFIG", "DATA"):
            patch.setenv(f"HELM_{name}_HOME", str(base / f"helm-{name.lower()}"))
        patch.setenv("MPLCONFIGDIR", str(base / "matplotlib"))
        patch.setenv("XDG_STATE_HOME", str(base / "state"))
        yield


@pytest.fixture(scope="session")
def helm3() -> Helm:
    return pinned_helm("3.17.2")


@pytest.fixture(scope="session")
def helm4() -> Helm:
    return pinned_helm("4.1.4")


@pytest.fixture(scope="session", params=HELM_VERSIONS, ids=lambda v: f"helm{v}")
def helm(request: pytest.FixtureRequest) -> Helm:
    """Each pinned helm in turn (the helm3 and helm4 fixtures)."""
    return request.getfixturevalue(f"helm{request.param.split('.')[0]}")


@pytest.fixture(scope="session")
def rendered() -> Render:
    """`rendered(helm, values_file)`: the chart rendered once per binary and file in a session;
    every call returns its own copy, so a test may change what it gets."""
    cache: dict[tuple[Path, Path], list[manifests.Manifest]] = {}

    def render(helm: Helm, values_file: Path) -> list[manifests.Manifest]:
        key = (helm.path, values_file)
        if key not in cache:
            cache[key] = render_file(helm, values_file)
        return copy.deepcopy(cache[key])

    return render


@pytest.fixture
def kube(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KubeAPIDouble]:
    """The Kubernetes API server double (tests/doubles/kube_api.py, not Kubernetes), with helm
    and the kubernetes client pointed at it."""
    with serving(tmp_path, monkeypatch) as api:
        yield api
