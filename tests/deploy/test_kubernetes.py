"""deploy/kubernetes renders (kubectl kustomize), every object is valid against the
Kubernetes API schemas (kubernetes-validate), and the values that must agree do: ports,
the head's address, the workers' grace against their drain, the Secrets and claims pods
mount, selectors. Each check is also shown to catch a manifest broken on purpose."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable

import pytest

from .support.kube import (
    KUSTOMIZE,
    Obj,
    check_drain_grace,
    check_head_address,
    check_listen_ports,
    check_selectors,
    check_services,
    containers,
    example_copy,
    named,
    of_kind,
    render,
)
from .support.pods import (
    check_agreements,
    check_pods_run_well,
    check_probe_cert_read_only,
    check_tls,
    check_volumes,
)

pytestmark = pytest.mark.skipif(
    shutil.which("kubectl") is None, reason="kubectl (for `kubectl kustomize`) is not installed"
)
kubernetes_validate = pytest.importorskip("kubernetes_validate")

CHECKS = [
    check_selectors,
    check_services,
    check_listen_ports,
    check_head_address,
    check_drain_grace,
    check_volumes,
    check_tls,
    check_probe_cert_read_only,
    check_agreements,
    check_pods_run_well,
]
#: The Secrets the base mounts and an overlay must make.
BASE_SECRETS = {"dista-tls-head", "dista-tls-worker", "dista-tls-probe"}


def problems(objs: list[Obj]) -> list[str]:
    return [problem for check in CHECKS for problem in check(objs)]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> list[Obj]:
    return render(example_copy(tmp_path_factory.mktemp("deploy")))


@pytest.fixture(scope="module")
def base() -> list[Obj]:
    return render(KUSTOMIZE / "base")


def test_every_object_is_valid_against_the_api_schemas(
    base: list[Obj], example: list[Obj]
) -> None:
    version = kubernetes_validate.latest_version()
    for obj in [*base, *example]:
        kubernetes_validate.validate(obj, version, strict=True)


def test_the_example_agrees_with_itself(example: list[Obj]) -> None:
    assert problems(example) == []
    assert {o["metadata"]["namespace"] for o in example if o["kind"] != "Namespace"} == {"dista"}


def test_the_base_mounts_the_secrets_an_overlay_makes(base: list[Obj], example: list[Obj]) -> None:
    wanted = {
        v["secret"]["secretName"]
        for d in of_kind(base, "Deployment")
        for v in d["spec"]["template"]["spec"]["volumes"]
        if "secret" in v
    }
    assert wanted == BASE_SECRETS
    made = {s["metadata"]["name"].rsplit("-", 1)[0] for s in of_kind(example, "Secret")}
    assert made >= BASE_SECRETS
    # Without the Secrets, only the volume check has something to say.
    secretless = ("not rendered", "lacks", "no observer pair")
    rest = [p for p in problems(base) if not any(word in p for word in secretless)]
    assert rest == []


def test_the_images_are_dista_in_the_base_and_the_overlays_tag(
    base: list[Obj], example: list[Obj]
) -> None:
    assert {c["image"] for _, c in containers(base)} == {"dista:latest"}
    assert {c["image"] for _, c in containers(example)} == {"registry.example.com/dista:0.1.0"}
    assert named(example, "Deployment", "dista-worker")["spec"]["replicas"] == 4


def _pod(objs: list[Obj], name: str) -> Obj:
    pod: Obj = named(objs, "Deployment", name)["spec"]["template"]["spec"]
    return pod  # the object itself: a break changes it


def _c(objs: list[Obj], name: str) -> Obj:
    container: Obj = _pod(objs, name)["containers"][0]
    return container


def _worker(objs: list[Obj]) -> Obj:
    return _pod(objs, "dista-worker")


def _set_env(objs: list[Obj], deployment: str, key: str, value: str) -> None:
    for item in _c(objs, deployment)["env"]:
        if item["name"] == key:
            item["value"] = value


BREAKS: dict[str, tuple[Callable[[list[Obj]], None], str]] = {
    "service targetPort": (
        lambda o: named(o, "Service", "dista-head")["spec"]["ports"][0].update(targetPort=7421),
        "targetPort 7421",
    ),
    "head listens elsewhere": (
        lambda o: _c(o, "dista-head")["args"].__setitem__(4, "7421"),
        "listens on 7421",
    ),
    "worker dials a wrong port": (
        lambda o: _worker(o)["containers"][0]["args"].__setitem__(3, "dista-head:7000"),
        "--head dista-head:7000",
    ),
    "dashboard dials a wrong name": (
        lambda o: _c(o, "dista-dashboard")["args"].__setitem__(6, "head:7420"),
        "--head head:7420",
    ),
    "grace shorter than the drain": (
        lambda o: _worker(o).update(terminationGracePeriodSeconds=125),
        "does not cover",
    ),
    "drain longer than the grace": (
        lambda o: _set_env(o, "dista-worker", "DISTA_DRAIN_TIMEOUT", "300"),
        "does not cover",
    ),
    "a Secret missing": (
        lambda o: _worker(o)["volumes"][0]["secret"].update(secretName="dista-tls-nope"),
        "Secret dista-tls-nope",
    ),
    "a claim missing": (
        lambda o: _worker(o)["volumes"][1]["persistentVolumeClaim"].update(claimName="x"),
        "claim x",
    ),
    "a mount without volume": (
        lambda o: _worker(o)["containers"][0]["volumeMounts"][0].update(name="gone"),
        "mounts gone",
    ),
    "selector misses pods": (
        lambda o: named(o, "Deployment", "dista-worker")["spec"]["selector"]["matchLabels"].update(
            {"app.kubernetes.io/component": "workers"}
        ),
        "selector misses",
    ),
    "service selects nothing": (
        lambda o: named(o, "Service", "dista-dashboard")["spec"]["selector"].update(
            {"app.kubernetes.io/component": "board"}
        ),
        "selects no Deployment",
    ),
    "liveness timeouts differ": (
        lambda o: _set_env(o, "dista-worker", "DISTA_LIVENESS_TIMEOUT", "10"),
        "DISTA_LIVENESS_TIMEOUT differs",
    ),
    "TLS dir elsewhere": (
        lambda o: _set_env(o, "dista-head", "DISTA_TLS_DIR", "/etc/tls"),
        "DISTA_TLS_DIR '/etc/tls'",
    ),
    "a worker's key in the dashboard": (
        lambda o: _pod(o, "dista-dashboard")["volumes"][0]["secret"].update(
            secretName=_worker(o)["volumes"][0]["secret"]["secretName"]
        ),
        "not its role's",
    ),
    "supervised workers": (
        lambda o: _worker(o)["containers"][0]["args"].remove("--no-supervise"),
        "run supervised",
    ),
    "root": (
        lambda o: _worker(o)["securityContext"].update(runAsUser=0),
        "may run as root",
    ),
    "two heads": (
        lambda o: named(o, "Deployment", "dista-head")["spec"].update(replicas=2),
        "one replica",
    ),
}


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_a_broken_manifest_is_caught(example: list[Obj], name: str) -> None:
    broken = copy.deepcopy(example)
    breaking, said = BREAKS[name]
    breaking(broken)
    found = problems(broken)
    assert any(said in problem for problem in found), found


def test_a_schema_break_is_caught(example: list[Obj]) -> None:
    broken = copy.deepcopy(named(example, "Deployment", "dista-worker"))
    broken["spec"]["replicas"] = "four"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, kubernetes_validate.latest_version(), strict=True)
    unknown = copy.deepcopy(named(example, "Service", "dista-head"))
    unknown["spec"]["targetPorts"] = [7420]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(unknown, kubernetes_validate.latest_version(), strict=True)


def test_the_overlay_keeps_its_keys_out_of_git() -> None:
    ignored = (KUSTOMIZE / "overlays" / "example" / ".gitignore").read_text().split()
    assert "tls/" in ignored
