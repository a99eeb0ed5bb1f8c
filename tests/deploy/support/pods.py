"""Checks of what each pod mounts, how it runs and what it tells Dista (see kube.py)."""

from __future__ import annotations

import base64

from .kube import ROLE_FILES, TLS_DIR_FILES, Obj, component, containers, env, of_kind, option


def secret_files(objs: list[Obj], name: str) -> set[str] | None:
    for s in of_kind(objs, "Secret"):
        if s["metadata"]["name"] == name:
            return set(s.get("data", {})) | set(s.get("stringData", {}))
    return None


def mounted(objs: list[Obj], d: Obj, c: Obj) -> dict[str, set[str] | None]:
    """Mount path -> the files of the Secret mounted there (None: no such Secret)."""
    volumes = {v["name"]: v for v in d["spec"]["template"]["spec"].get("volumes", [])}
    found: dict[str, set[str] | None] = {}
    for m in c.get("volumeMounts", []):
        secret = volumes.get(m["name"], {}).get("secret")
        if secret:
            found[m["mountPath"]] = secret_files(objs, secret["secretName"])
    return found


def check_volumes(objs: list[Obj]) -> list[str]:
    """Every mount names a pod volume; every Secret and claim a volume names exists."""
    problems = []
    claims = {p["metadata"]["name"] for p in of_kind(objs, "PersistentVolumeClaim")}
    for d, c in containers(objs):
        name = d["metadata"]["name"]
        volumes = {v["name"]: v for v in d["spec"]["template"]["spec"].get("volumes", [])}
        problems += [
            f"{name}: mounts {m['name']}, no volume of its pod"
            for m in c.get("volumeMounts", [])
            if m["name"] not in volumes
        ]
        for v in volumes.values():
            secret = v.get("secret", {}).get("secretName")
            if secret and secret_files(objs, secret) is None:
                problems.append(f"{name}: volume {v['name']} needs Secret {secret}, not rendered")
            claim = v.get("persistentVolumeClaim", {}).get("claimName")
            if claim and claim not in claims:
                problems.append(f"{name}: volume {v['name']} needs claim {claim}, not rendered")
    return problems


def check_tls(objs: list[Obj]) -> list[str]:
    """DISTA_TLS_DIR and each probe's --tls-dir hold their role's files; a pod mounts only
    its role's; no ca.key anywhere."""
    problems = [
        f"Secret {s['metadata']['name']} holds ca.key"
        for s in of_kind(objs, "Secret")
        if "ca.key" in (secret_files(objs, s["metadata"]["name"]) or set())
    ]
    for d, c in containers(objs):
        role, name = component(d), d["metadata"]["name"]
        mounts = mounted(objs, d, c)
        every = set().union(*(files or set() for files in mounts.values()))
        if every - ROLE_FILES[role]:
            problems.append(f"{name}: mounts {sorted(every - ROLE_FILES[role])}, not its role's")
        tls_dir = env(c).get("DISTA_TLS_DIR", "")
        if not TLS_DIR_FILES[role] <= (mounts.get(tls_dir) or set()):
            problems.append(f"{name}: DISTA_TLS_DIR {tls_dir!r} lacks {role}'s files")
        for kind in ("readinessProbe", "livenessProbe"):
            command = c.get(kind, {}).get("exec", {}).get("command", [])
            probe_dir = option(command, "--tls-dir")
            if probe_dir and not {"ca.pem", "observer.pem"} <= (mounts.get(probe_dir) or set()):
                problems.append(f"{name}: {kind}'s --tls-dir {probe_dir} has no observer pair")
    return problems


def check_probe_cert_read_only(objs: list[Obj]) -> list[str]:
    """The observer pair pods hold cannot stop the cluster (only when the Secrets' data is
    real: the rendered example's is)."""
    problems = []
    for s in of_kind(objs, "Secret"):
        pem = s.get("data", {}).get("observer.pem")
        if pem and b"OU=stop" in _subject(base64.b64decode(pem)):
            problems.append(f"Secret {s['metadata']['name']}: its observer may stop the cluster")
    return problems


def _subject(pem: bytes) -> bytes:
    from cryptography import x509

    return x509.load_pem_x509_certificate(pem).subject.rfc4514_string().encode()


def check_agreements(objs: list[Obj]) -> list[str]:
    """The head's liveness timeout is the workers' (they beat by it); one head, Recreate."""
    problems = []
    timeouts = {
        component(d): env(c).get("DISTA_LIVENESS_TIMEOUT")
        for d, c in containers(objs)
        if component(d) in ("head", "worker")
    }
    if timeouts.get("head") != timeouts.get("worker"):
        problems.append(f"DISTA_LIVENESS_TIMEOUT differs between head and workers: {timeouts}")
    heads = [d["spec"] for d in of_kind(objs, "Deployment") if component(d) == "head"]
    if [(h.get("replicas"), h.get("strategy", {}).get("type")) for h in heads] != [
        (1, "Recreate")
    ]:
        problems.append("the head must be one replica, replaced with strategy Recreate")
    return problems


def check_pods_run_well(objs: list[Obj]) -> list[str]:
    """Non-root, no privilege escalation, requests and limits, JSON logs."""
    problems = []
    for d, c in containers(objs):
        name, pod = d["metadata"]["name"], d["spec"]["template"]["spec"]
        context = pod.get("securityContext", {})
        if not context.get("runAsNonRoot") or context.get("runAsUser", 0) == 0:
            problems.append(f"{name}: may run as root")
        if c.get("securityContext", {}).get("allowPrivilegeEscalation", True):
            problems.append(f"{name}: allows privilege escalation")
        resources = c.get("resources", {})
        problems += [
            f"{name}: no cpu and memory {part}"
            for part in ("requests", "limits")
            if not {"cpu", "memory"} <= set(resources.get(part, {}))
        ]
        if env(c).get("DISTA_LOG_FORMAT") != "json":
            problems.append(f"{name}: logs are not JSON")
        if not (c.get("readinessProbe") or c.get("livenessProbe")):
            problems.append(f"{name}: no probe")
    return problems
