"""The container image and the Kubernetes manifests (Dockerfile, deploy/kubernetes/,
docs/kubernetes.md): every manifest valid against a pinned Kubernetes release's API schemas,
offline; the pods non-root with the image's user, their ports, names and variables agreeing;
the Dockerfile as documented; the docs naming the pods' very commands; and the image built where
a Docker daemon and the base image are at hand. The pods' commands themselves run in
tests/integration/test_kubernetes_pods.py."""

from __future__ import annotations

import copy
import json
import re
import shutil
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import ValidationError

from tests.helpers.kube import (
    DEPLOY,
    REPO,
    VAR,
    configmap_files,
    container,
    dockerfile_instructions,
    entrypoint,
    env_of,
    expand,
    manifest_files,
    pod_spec,
    resource,
    resources,
)

# The Kubernetes release whose API schemas the manifests must satisfy (kubernetes-validate ships
# them). The oldest one still supported by the big managed services when this was written.
KUBERNETES = "1.31"
WORKLOAD_KINDS = {"Deployment", "Job", "Pod"}
DOC = REPO / "docs" / "kubernetes.md"
BASE_IMAGE = "python:3.11-slim"


def all_resources() -> list[tuple[str, dict]]:
    return [(str(p.relative_to(REPO)), r) for p in manifest_files() for r in resources(p)]


def workloads() -> list[tuple[str, dict]]:
    return [(f, r) for f, r in all_resources() if r["kind"] in WORKLOAD_KINDS]


def validate(doc: dict) -> None:
    kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def test_there_are_manifests_of_both_variants() -> None:
    kinds = {(f.split("/")[2], r["kind"], r["metadata"]["name"]) for f, r in all_resources()}
    assert {("common", "Deployment", "loadkit-worker"), ("common", "Service", "loadkit-master"),
            ("common", "ConfigMap", "loadkit-config"), ("common", "PersistentVolumeClaim", "loadkit-reports"),
            ("headless", "Job", "loadkit-master"), ("webui", "Deployment", "loadkit-master"),
            ("webui", "Service", "loadkit-web")} <= kinds  # fmt: skip


@pytest.mark.parametrize("where", [f"{f}:{r['kind']}/{r['metadata']['name']}" for f, r in all_resources()])
def test_every_manifest_validates_against_the_kubernetes_schemas(where: str) -> None:
    file, _, name = where.partition(":")
    (doc,) = [r for r in resources(REPO / file) if f"{r['kind']}/{r['metadata']['name']}" == name]
    validate(doc)


def broken_copies() -> dict[str, dict]:
    job = resource("Job", "loadkit-master", "headless")
    workers = resource("Deployment", "loadkit-worker", "common")
    out = {}
    out["misspelled field"] = copy.deepcopy(workers)
    out["misspelled field"]["spec"]["replica"] = out["misspelled field"]["spec"].pop("replicas")
    out["wrong type"] = copy.deepcopy(workers)
    out["wrong type"]["spec"]["replicas"] = "two"
    out["container without a name"] = copy.deepcopy(job)
    del container(out["container without a name"])["name"]
    service = resource("Service", "loadkit-master", "common")
    out["port not a number"] = copy.deepcopy(service)
    out["port not a number"]["spec"]["ports"][0]["port"] = "master"
    out["env value not a string"] = copy.deepcopy(job)
    container(out["env value not a string"])["env"][0]["value"] = 5557
    return out


@pytest.mark.parametrize("what", sorted(broken_copies()))
def test_a_broken_manifest_fails_validation(what: str) -> None:
    with pytest.raises(ValidationError):
        validate(broken_copies()[what])


def test_validation_needs_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"validation reached for the network: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    for _, doc in all_resources():
        validate(doc)


def image_user() -> str:
    users = [rest for word, rest in dockerfile_instructions() if word == "USER"]
    assert users, "the Dockerfile sets no USER: the image would run as root"
    return users[-1]


def test_the_dockerfile_is_as_documented() -> None:
    steps = dockerfile_instructions()
    args = {rest.partition("=")[0]: rest.partition("=")[2] for word, rest in steps if word == "ARG"}
    assert args["PYTHON_IMAGE"] == BASE_IMAGE
    froms = [rest.split()[0] for word, rest in steps if word == "FROM"]
    assert len(froms) == 2 and set(froms) == {"${PYTHON_IMAGE}"}, "a build stage, then the image"
    assert args["EXTRA_PIP"] == '""'
    final = steps[max(i for i, (word, _) in enumerate(steps) if word == "FROM") :]
    installs = [rest for word, rest in final if word == "RUN" and "pip install" in rest]
    assert len(installs) == 1 and "${EXTRA_PIP}" in installs[0] and "/wheels/loadkit-" in installs[0]
    assert ("ARG", 'EXTRA_PIP=""') in final, "EXTRA_PIP is declared in the stage that installs"
    uid, _, gid = image_user().partition(":")
    assert uid.isdigit() and int(uid) != 0 and gid.isdigit() and int(gid) != 0, "a numeric, non-root user"
    assert f"--uid {uid}" in installs[0] and f"--gid {gid}" in installs[0]
    assert entrypoint() == ["loadkit"]
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert "loadkit" in scripts


def test_the_build_context_keeps_what_a_wheel_needs() -> None:
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()}
    ignored = {line for line in ignored if line and not line.startswith("#")}
    needed = {"loadkit", "scenarios", "plugins", "setup.py", "pyproject.toml", "README.md", "MANIFEST.in"}
    assert not needed & ignored
    assert {".git", ".venv"} <= ignored


@pytest.mark.parametrize("where", [f"{f}:{r['metadata']['name']}" for f, r in workloads()])
def test_every_pod_runs_as_the_image_s_non_root_user_with_resources(where: str) -> None:
    file, _, name = where.partition(":")
    (doc,) = [r for r in resources(REPO / file) if r["metadata"]["name"] == name]
    security = pod_spec(doc)["securityContext"]
    uid, _, gid = image_user().partition(":")
    assert security["runAsNonRoot"] is True
    assert (security["runAsUser"], security["runAsGroup"]) == (int(uid), int(gid))
    spec = container(doc)
    assert spec["securityContext"]["allowPrivilegeEscalation"] is False
    assert set(spec["resources"]) == {"requests", "limits"}
    assert spec["image"] == "loadkit:latest", "one image name, the one docs/kubernetes.md builds"
    unset = {v for a in spec.get("args", []) for v in VAR.findall(a)} - set(env_of(doc))
    assert not unset, f"args name variables the container does not set: {unset}"


def pod_labels(doc: dict) -> dict[str, str]:
    return (
        doc["metadata"]["labels"] if doc["kind"] == "Pod" else doc["spec"]["template"]["metadata"]["labels"]
    )


@pytest.mark.parametrize("variant", ["headless", "webui"])
def test_services_reach_named_ports_that_the_args_use(variant: str) -> None:
    docs = [r for f, r in all_resources() if f.split("/")[2] in ("common", variant)]
    pods = [r for r in docs if r["kind"] in WORKLOAD_KINDS]
    for service in (r for r in docs if r["kind"] == "Service"):
        selector = service["spec"]["selector"]
        chosen = [p for p in pods if selector.items() <= pod_labels(p).items()]
        assert len(chosen) == 1, f"Service {service['metadata']['name']} selects {len(chosen)} workloads"
        ports = {p["name"]: p["containerPort"] for p in container(chosen[0]).get("ports", [])}
        for port in service["spec"]["ports"]:
            assert port["port"] == ports[port["targetPort"]], (service["metadata"]["name"], port)
    master = next(p for p in pods if pod_labels(p)["app.kubernetes.io/component"] == "master")
    ports = {p["name"]: p["containerPort"] for p in container(master)["ports"]}
    env = env_of(master)
    assert int(env["MASTER_PORT"]) == ports["master"]
    assert "--master-bind-port" in container(master)["args"]
    workers = resource("Deployment", "loadkit-worker", "common")
    service = resource("Service", "loadkit-master", "common")
    assert env_of(workers)["MASTER_HOST"] == service["metadata"]["name"]
    assert env_of(workers)["MASTER_PORT"] == env["MASTER_PORT"]
    if variant == "webui":
        assert int(env["WEB_PORT"]) == ports["web"]
        assert container(master)["readinessProbe"]["httpGet"]["port"] == "web"


def test_the_variants_run_as_named() -> None:
    job = container(resource("Job", "loadkit-master", "headless"))["args"]
    for flag in ("--master", "--headless", "--expect-workers", "-u", "-r", "-t", "--report-dir"):
        assert flag in job
    web = container(resource("Deployment", "loadkit-master", "webui"))["args"]
    assert "--ui" in web and "--headless" not in web and "--master" in web
    assert container(resource("Deployment", "loadkit-worker", "common"))["args"][:2] == ["run", "--worker"]


def test_the_configmap_s_scenario_loads_where_locust_conf_names_it(tmp_path) -> None:
    from loadkit.workload.scenario import load_scenario

    files = configmap_files("loadkit-config")
    conf = dict(
        (k.strip(), v.strip())
        for k, _, v in (line.partition("=") for line in files["locust.conf"].splitlines())
        if k.strip() and not k.strip().startswith("#")
    )
    workers = resource("Deployment", "loadkit-worker", "common")
    (mount,) = [m["mountPath"] for m in container(workers)["volumeMounts"] if m["name"] == "config"]
    assert conf["scenario"].startswith(mount + "/")
    name = conf["scenario"][len(mount) + 1 :]
    (tmp_path / name).write_text(files[name])
    assert load_scenario(tmp_path / name).name == "k8s-chat"
    assert {"host", "engine"} <= conf.keys()


def pod_command(workload: dict) -> str:
    spec = container(workload)
    return " ".join(expand([*spec.get("command", entrypoint()), *spec["args"]], env_of(workload)))


def test_the_docs_show_the_pods_commands_and_the_manifests_files() -> None:
    text = " ".join(DOC.read_text().split())  # the docs may wrap a command's line
    for folder, kind, name in [("common", "Deployment", "loadkit-worker"), ("headless", "Job", "loadkit-master"),
                               ("webui", "Deployment", "loadkit-master")]:  # fmt: skip
        command = pod_command(resource(kind, name, folder))
        assert command in text.replace(" \\ ", " "), (
            f"docs/kubernetes.md does not show {kind} {name}: {command}"
        )
    for path in re.findall(r"deploy/kubernetes/[\w./-]*\w", text):
        assert (REPO / path).exists(), f"docs/kubernetes.md names {path}, which is not there"
    named = {f"{r['kind'].lower()}/{r['metadata']['name']}" for _, r in all_resources()}
    for ref in re.findall(r"\b(?:deployment|job|service|pod)/[\w-]+", text):
        assert ref in named, f"docs/kubernetes.md names {ref}; the manifests have {sorted(named)}"
    uid = image_user().partition(":")[0]
    assert f"uid {uid}" in text
    for folder in sorted(p.name for p in DEPLOY.iterdir() if p.is_dir()):
        assert f"deploy/kubernetes/{folder}" in text


def docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.integration
def test_the_image_builds_runs_as_its_user_and_loads_a_plugin() -> None:
    if shutil.which("docker") is None:
        pytest.skip("no docker client on this machine (`docker` is not on PATH)")
    info = docker("info", "--format", "{{json .ServerVersion}}")
    if info.returncode != 0 and "Cannot connect to the Docker daemon" in info.stderr:
        pytest.skip(f"no Docker daemon: {info.stderr.strip().splitlines()[-1]}")
    assert info.returncode == 0, info.stderr
    pulled = docker("pull", BASE_IMAGE, timeout=600)
    if pulled.returncode != 0:
        pytest.skip(f"the base image {BASE_IMAGE} cannot be pulled here: {pulled.stderr.strip()[-300:]}")
    tag = "loadkit:test-deploy"
    build = docker("build", "-t", tag, "--build-arg", "EXTRA_PIP=loadkit-anthropic", str(REPO), timeout=1800)
    assert build.returncode == 0, build.stderr[-3000:]
    assert (
        docker("run", "--rm", "--entrypoint", "id", tag, "-u").stdout.strip()
        == image_user().partition(":")[0]
    )
    version = docker("run", "--rm", tag, "--version")
    assert version.returncode == 0 and version.stdout.strip(), version.stderr
    plugins = docker("run", "--rm", tag, "plugins")
    assert plugins.returncode == 0 and "anthropic" in json.dumps(json.loads(plugins.stdout)), plugins.stderr


def build_context(into: Path) -> Path:
    """The repository as `docker build` sends it: .dockerignore's entries left out."""
    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()]
    patterns = [p for p in patterns if p and not p.startswith("#")]
    anywhere = [p.removeprefix("**/") for p in patterns if p.startswith("**/")]
    top = [p for p in patterns if not p.startswith("**/")]
    ignore = shutil.ignore_patterns(*anywhere, *top)
    into.mkdir()
    for entry in sorted(REPO.iterdir()):
        if ignore(str(REPO), [entry.name]):
            continue
        if entry.is_dir():
            shutil.copytree(entry, into / entry.name, ignore=shutil.ignore_patterns(*anywhere))
        else:
            shutil.copy2(entry, into / entry.name)
    return into


def pip_step(run: str, pip: Path, wheels: Path, extra_pip: str) -> str:
    """The pip command of one RUN instruction (the user and directory set-up of the same RUN
    are the image's, not this machine's), with the image's paths replaced by the test's."""
    (step,) = [part.strip() for part in run.split("&&") if part.strip().startswith("pip ")]
    step = step.replace("${EXTRA_PIP}", extra_pip).replace("/wheels", str(wheels))
    return str(pip) + step.removeprefix("pip")


@pytest.mark.slow
@pytest.mark.integration
def test_the_image_s_pip_steps_install_loadkit_with_a_plugin(tmp_path: Path) -> None:
    """Without Docker: the Dockerfile's own pip steps, from the build context .dockerignore
    leaves, into a fresh venv; loadkit installs from the wheel and the plugin from EXTRA_PIP."""
    steps = dockerfile_instructions()
    runs = [rest for word, rest in steps if word == "RUN" and "pip " in rest]
    assert len(runs) == 2, "a pip wheel step in the build stage, a pip install step in the image"
    context = build_context(tmp_path / "context")
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    pip, wheels = tmp_path / "venv" / "bin" / "pip", tmp_path / "wheels"
    for run in runs:
        command = pip_step(run, pip, wheels, "loadkit-anthropic")
        done = subprocess.run(command, shell=True, cwd=context, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, (command, done.stderr[-3000:])
    loadkit = tmp_path / "venv" / "bin" / entrypoint()[0]
    version = subprocess.run([loadkit, "--version"], capture_output=True, text=True, cwd=tmp_path)
    assert (
        version.stdout.strip() == tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    )
    plugins = json.loads(subprocess.run([loadkit, "plugins"], capture_output=True, text=True).stdout)
    assert {"anthropic"} <= {e["engine"] for e in plugins["engines"]}


def test_manifests_are_plain_yaml_documents() -> None:
    """kubectl apply -f reads each file; a file that is not YAML resources would stop it."""
    for path in manifest_files():
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        assert docs and all({"apiVersion", "kind", "metadata"} <= d.keys() for d in docs), path
