"""deploy/kubernetes/'s manifests, read by the tests: the resources, and each pod's command run
as a process on this machine, so a test runs exactly what the pods run.

A pod's command is the image's entrypoint (read from the Dockerfile) followed by the container's
``args`` with Kubernetes' ``$(VAR)`` expansion from its ``env``. On loopback only the values of
that ``env`` change (the master's address and port, the run's length), never the args; the
volumes become directories (a ConfigMap's files written out, its mount path replaced by the
directory's wherever the files name it), and the ConfigMap's ``host`` is the test's server.
loadkit itself never reads deploy/: only these tests do.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "kubernetes"
DOCKERFILE = REPO / "Dockerfile"
VAR = re.compile(r"\$\((\w+)\)")


def manifest_files() -> list[Path]:
    return sorted(DEPLOY.rglob("*.yaml"))


def resources(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def resource(kind: str, name: str, folder: str) -> dict[str, Any]:
    """The one resource of that kind and name under deploy/kubernetes/FOLDER/."""
    found = [r for p in sorted((DEPLOY / folder).glob("*.yaml")) for r in resources(p)
             if r["kind"] == kind and r["metadata"]["name"] == name]  # fmt: skip
    assert len(found) == 1, f"{kind} {name} in deploy/kubernetes/{folder}/: found {len(found)}"
    return found[0]


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"] if workload["kind"] == "Pod" else workload["spec"]["template"]["spec"]


def container(workload: dict[str, Any]) -> dict[str, Any]:
    containers = pod_spec(workload)["containers"]
    assert len(containers) == 1, f"{workload['metadata']['name']}: one container expected"
    return containers[0]


def env_of(workload: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: str(e["value"]) for e in container(workload).get("env", [])}


def expand(args: list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' expansion of ``$(VAR)`` in args (an unknown one stays as written, as there)."""
    return [VAR.sub(lambda m: env.get(m.group(1), m.group(0)), a) for a in args]


def dockerfile_instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, rest) per instruction of the Dockerfile, continuation lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        pending += stripped.removesuffix("\\").strip() + " "
        if stripped.endswith("\\"):
            continue
        word, _, rest = pending.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        pending = ""
    return out


def entrypoint() -> list[str]:
    """The image's ENTRYPOINT (exec form) of the final stage."""
    found = [rest for word, rest in dockerfile_instructions() if word == "ENTRYPOINT"]
    assert found, "the Dockerfile has no ENTRYPOINT"
    value = json.loads(found[-1])
    assert isinstance(value, list), f"ENTRYPOINT {found[-1]} is not the exec form"
    return [str(v) for v in value]


def configmap_files(name: str) -> dict[str, str]:
    return dict(resource("ConfigMap", name, "common")["data"])


@dataclass
class Pods:
    """The manifests' pods as processes on this machine, their volumes under ``root``."""

    root: Path
    host: str
    mounts: dict[str, Path] = field(default_factory=dict)  # volume key -> directory

    def volume_dir(self, pod: str, volume: dict[str, Any]) -> Path:
        """One directory per ConfigMap and per claim (shared, as in the cluster); an emptyDir is
        the pod's own."""
        if "configMap" in volume:
            key = f"configmap-{volume['configMap']['name']}"
        elif "persistentVolumeClaim" in volume:
            key = f"pvc-{volume['persistentVolumeClaim']['claimName']}"
        else:
            key = f"{pod}-{volume['name']}"
        if key not in self.mounts:
            self.mounts[key] = self.root / key
            self.mounts[key].mkdir(parents=True)
            if "configMap" in volume:
                self._write_configmap(volume["configMap"]["name"], self.mounts[key])
        return self.mounts[key]

    def _write_configmap(self, name: str, folder: Path) -> None:
        for file, text in configmap_files(name).items():
            if file == "locust.conf":
                text = re.sub(r"(?m)^host\s*=.*$", f"host = {self.host}", text)
            (folder / file).write_text(text)

    def paths(self, pod: str, workload: dict[str, Any]) -> dict[str, Path]:
        """mountPath -> directory, for the container's volume mounts."""
        volumes = {v["name"]: v for v in pod_spec(workload).get("volumes", [])}
        return {m["mountPath"]: self.volume_dir(pod, volumes[m["name"]])
                for m in container(workload).get("volumeMounts", [])}  # fmt: skip

    def command(self, pod: str, workload: dict[str, Any], **env: str) -> tuple[list[str], dict[str, str]]:
        """(argv, environment) of the pod's container, ``env`` replacing values of its env."""
        values = {**env_of(workload), **env}
        unknown = set(env) - set(env_of(workload))
        assert not unknown, f"{workload['metadata']['name']} has no env {sorted(unknown)}"
        spec = container(workload)
        argv = expand([*spec.get("command", entrypoint()), *spec.get("args", [])], values)
        mounted = self.paths(pod, workload)
        for mount, folder in mounted.items():
            argv = [str(folder) + a[len(mount) :] if a == mount or a.startswith(mount + "/") else a
                    for a in argv]  # fmt: skip
        for folder in (f for f in mounted.values() if f.name.startswith("configmap-")):
            for path in folder.iterdir():  # a file naming a mount path (locust.conf's scenario)
                text = path.read_text()
                for mount, target in mounted.items():
                    text = text.replace(mount + "/", str(target) + "/")
                path.write_text(text)
        if argv[0] == "loadkit":  # the image's console script: this environment's
            argv[0] = str(Path(sys.executable).parent / "loadkit")
        return argv, values
