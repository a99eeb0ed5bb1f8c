"""Render deploy/kubernetes with kubectl's kustomize, and check what its objects must agree
on. Each check returns the problems it finds, in words, so that a test can break a rendered
object on purpose and see the check name it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
KUSTOMIZE = ROOT / "deploy" / "kubernetes"
Obj = dict[str, Any]
#: The files of `dista certs` output each role's pod may mount, and no more.
ROLE_FILES = {
    "head": {"ca.pem", "head.pem", "head.key", "observer.pem", "observer.key"},
    "worker": {"ca.pem", "worker.pem", "worker.key", "driver.pem", "driver.key"},
    "dashboard": {"ca.pem", "observer.pem", "observer.key"},
}
#: What DISTA_TLS_DIR must hold for each role (a worker's tasks dial the head as drivers).
TLS_DIR_FILES = {
    "head": {"ca.pem", "head.pem", "head.key"},
    "worker": {"ca.pem", "worker.pem", "worker.key", "driver.pem", "driver.key"},
    "dashboard": {"ca.pem", "observer.pem", "observer.key"},
}
#: A drain is never cut short: the grace passes DISTA_DRAIN_TIMEOUT by at least this.
DRAIN_MARGIN_S = 10


def render(directory: Path) -> list[Obj]:
    out = subprocess.run(
        ["kubectl", "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def example_copy(tmp: Path) -> Path:
    """deploy/kubernetes copied to ``tmp``, with the example overlay's tls/ made as its
    comment says (`dista certs`, a read-only probe pair); returns the overlay."""
    shutil.copytree(KUSTOMIZE, tmp / "kubernetes")
    ca = tmp / "ca"
    certs = "import sys; from dista_runtime.cli import main; sys.exit(main(sys.argv[1:]))"
    for args in ([str(ca)], [str(ca), "--issue", "probe", "--roles", "observer"]):
        subprocess.run(
            [sys.executable, "-c", certs, "certs", *args], check=True, capture_output=True
        )
    overlay = tmp / "kubernetes" / "overlays" / "example"
    (overlay / "tls").mkdir()
    for pem in ca.iterdir():
        if pem.stem in ("ca", "head", "worker", "driver", "probe") and pem.name != "ca.key":
            shutil.copy(pem, overlay / "tls" / pem.name)
    return overlay


def of_kind(objs: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objs if o["kind"] == kind]


def named(objs: list[Obj], kind: str, name: str) -> Obj:
    (found,) = [o for o in of_kind(objs, kind) if o["metadata"]["name"] == name]
    return found


def component(deployment: Obj) -> str:
    return str(deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"])


def containers(objs: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    for d in of_kind(objs, "Deployment"):
        for c in d["spec"]["template"]["spec"]["containers"]:
            yield d, c


def env(container: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_selectors(objs: list[Obj]) -> list[str]:
    problems = []
    for d in of_kind(objs, "Deployment"):
        labels = d["spec"]["template"]["metadata"]["labels"]
        if not selects(d["spec"]["selector"]["matchLabels"], labels):
            problems.append(f"Deployment {d['metadata']['name']}: selector misses its pods")
    return problems


def check_services(objs: list[Obj]) -> list[str]:
    """Each Service selects a Deployment's pods, and each targetPort is a port they open."""
    problems = []
    for s in of_kind(objs, "Service"):
        name = s["metadata"]["name"]
        chosen = [
            d
            for d in of_kind(objs, "Deployment")
            if selects(s["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"])
        ]
        if not chosen:
            problems.append(f"Service {name}: selects no Deployment's pods")
        for port in s["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            for d in chosen:
                opened = [
                    p
                    for c in d["spec"]["template"]["spec"]["containers"]
                    for p in c.get("ports", [])
                    if target in (p.get("name"), p["containerPort"])
                ]
                if not opened:
                    problems.append(f"Service {name}: targetPort {target} is no port of its pods")
    return problems


def check_listen_ports(objs: list[Obj]) -> list[str]:
    """The port each server is told to listen on (--port) is its container's port."""
    problems = []
    for d, c in containers(objs):
        port = option(c.get("args", []), "--port")
        opened = {p["containerPort"] for p in c.get("ports", [])}
        if port is not None and int(port) not in opened:
            problems.append(f"{d['metadata']['name']}: listens on {port}, opens {opened}")
    return problems


def check_head_address(objs: list[Obj]) -> list[str]:
    """Every --head a pod dials is a Service's name and port that reaches the head."""
    problems = []
    for d, c in containers(objs):
        args = c.get("args", [])
        head = option(args, "--head")
        if head is None or args[0] == "head":
            continue
        host, port = head.rsplit(":", 1)
        services = [s for s in of_kind(objs, "Service") if s["metadata"]["name"] == host]
        ports = [p for s in services for p in s["spec"]["ports"] if p["port"] == int(port)]
        heads = [
            h
            for s in services
            for h in of_kind(objs, "Deployment")
            if component(h) == "head"
            and selects(s["spec"]["selector"], h["spec"]["template"]["metadata"]["labels"])
        ]
        if not ports or not heads:
            problems.append(f"{d['metadata']['name']}: --head {head} is no Service of the head")
    return problems


def check_drain_grace(objs: list[Obj]) -> list[str]:
    problems = []
    for d, c in containers(objs):
        if component(d) != "worker":
            continue
        drain = env(c).get("DISTA_DRAIN_TIMEOUT")
        grace = d["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
        if drain is None:
            problems.append("the workers leave DISTA_DRAIN_TIMEOUT unset (120 s): set it")
        elif grace < float(drain) + DRAIN_MARGIN_S:
            problems.append(f"workers' grace {grace} s does not cover a {drain} s drain")
        if "--no-supervise" not in c.get("args", []):
            problems.append("workers run supervised: the pod's SIGTERM reaches the supervisor")
    return problems
