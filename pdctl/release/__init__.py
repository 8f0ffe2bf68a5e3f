"""Releases on a cluster: deploy (helm upgrade --install, watched and checked), status,
uninstall, and the pods of a release by PD role. One module each; this package's names are
what the CLI and verify use (verify looks up `release_pods` here by name)."""

from pdctl.release.deploy import (
    Change,
    DeployOptions,
    DeployResult,
    Reporter,
    deploy,
    diff_objects,
    parse_timeout,
    startup_budget,
    wait_seconds,
)
from pdctl.release.pods import Group, groups_of, release_pods
from pdctl.release.status import StatusReport, status
from pdctl.release.uninstall import UninstallResult, uninstall
from pdctl.release.watch import Watch

__all__ = [
    "Change",
    "DeployOptions",
    "DeployResult",
    "Group",
    "Reporter",
    "StatusReport",
    "UninstallResult",
    "Watch",
    "deploy",
    "diff_objects",
    "groups_of",
    "parse_timeout",
    "release_pods",
    "startup_budget",
    "status",
    "uninstall",
    "wait_seconds",
]
