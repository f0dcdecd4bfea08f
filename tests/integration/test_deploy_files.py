"""The deployment files in infra/: Kubernetes manifests valid against the Kubernetes schemas and
consistent with each other and with the image; compose parses and wires two replicas, a migration
and a refresh; the image's pinned install replays in a clean virtual environment.

No container engine runs here, so the image itself is not built; its ``pip install`` steps are
replayed instead (``test_dockerfile_install_replays_in_a_clean_venv``, CI only: about a minute).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from service.settings import ENV_PREFIX, Settings

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
K8S = INFRA / "k8s"
# The oldest Kubernetes the manifests are meant for (CronJob timeZone is GA from 1.27).
K8S_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
# Applied on their own: the Job before each rollout, the Secrets (a template) from real values.
NOT_IN_KUSTOMIZATION = {"migrate-job.yaml", "secret.yaml"}


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def _manifests() -> list[Path]:
    return sorted(p for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")


def _all_resources() -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for p in _manifests() for d in _docs(p)}


def _pod_spec(resource: dict[str, Any]) -> dict[str, Any]:
    spec = resource["spec"]
    if resource["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


def _workloads() -> list[dict[str, Any]]:
    return [r for r in _all_resources().values() if r["kind"] in {"Deployment", "Job", "CronJob"}]


def _setting_env_names() -> set[str]:
    return {f"{ENV_PREFIX}{name}".upper() for name in Settings.model_fields}


# -- Kubernetes ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("path", _manifests(), ids=lambda p: p.name)
def test_manifest_validates_against_the_kubernetes_schema(path: Path, version: str) -> None:
    docs = _docs(path)
    assert docs, f"{path.name} holds no resource"
    for doc in docs:
        # strict: a misspelt or misplaced field is an error, not silently dropped by the API server.
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_schema_check_catches_a_misplaced_field() -> None:
    deployment = _all_resources()[("Deployment", "gpucost-api")]
    broken = yaml.safe_load(yaml.safe_dump(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessprobe"] = {"httpGet": {"path": "/readyz"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSIONS[0], strict=True)


def test_kustomization_lists_every_manifest_and_pins_one_image() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    assert listed == {p.name for p in _manifests()} - NOT_IN_KUSTOMIZATION
    (image,) = kustomization["images"]
    wanted = f"{image['newName']}:{image['newTag']}"
    for workload in _workloads():
        for container in _pod_spec(workload)["containers"]:
            # The migration Job is applied on its own, so it must already name the same tag.
            assert container["image"] == wanted, (workload["metadata"]["name"], container["image"])


def test_kustomize_build_is_valid_when_kubectl_is_installed() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed (optional: the manifests are validated file by file above)")
    out = subprocess.run([kubectl, "kustomize", str(K8S)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    built = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert {d["kind"] for d in built} >= {"Deployment", "Service", "CronJob", "PodDisruptionBudget",
                                          "ConfigMap", "Namespace"}
    for doc in built:
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "gpucost", doc["metadata"]
        kubernetes_validate.validate(doc, K8S_VERSIONS[0], strict=True)


def test_deployment_probes_ports_and_resources() -> None:
    resources = _all_resources()
    deployment = resources[("Deployment", "gpucost-api")]
    assert deployment["spec"]["replicas"] >= 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pod = _pod_spec(deployment)
    (api,) = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in api["ports"]}
    args = api["args"]
    assert args[:2] == ["gpucost", "serve"]
    assert int(args[args.index("--port") + 1]) == ports["http"] == _dockerfile_exposed_port()
    assert api["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert api["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert api["startupProbe"]["httpGet"]["path"] == "/healthz"
    requests, limits = api["resources"]["requests"], api["resources"]["limits"]
    assert {"cpu", "memory"} <= set(requests) and "memory" in limits

    service = resources[("Service", "gpucost")]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= set(ports)
    pdb = resources[("PodDisruptionBudget", "gpucost-api")]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]


def test_every_pod_runs_as_the_image_user_without_privileges() -> None:
    uid = _dockerfile_user_uid()
    for workload in _workloads():
        pod = _pod_spec(workload)
        name = workload["metadata"]["name"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] == uid, name
        assert pod.get("automountServiceAccountToken") is False, name
        for container in pod["containers"]:
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, name
            assert sc["capabilities"]["drop"] == ["ALL"], name
            # A read-only root needs a writable /tmp (matplotlib's cache, temp files).
            assert "/tmp" in {m["mountPath"] for m in container.get("volumeMounts", [])}, name


def test_config_and_secrets_are_wired_and_name_real_settings() -> None:
    resources = _all_resources()
    known = _setting_env_names()
    provided: dict[str, set[str]] = {}
    for (kind, name), res in resources.items():
        if kind in {"ConfigMap", "Secret"}:
            keys = set(res.get("data", {})) | set(res.get("stringData", {}))
            provided[name] = keys
            for key in keys:
                if key.startswith("GPUCOST_"):
                    assert key in known, f"{kind} {name}: {key} is no setting of service.settings"
    assert "GPUCOST_DB_URL" in provided["gpucost-db"]
    assert "GPUCOST_ADMIN_TOKEN" in provided["gpucost-admin"]
    # The ConfigMap's values read as the server reads them: comma-separated region lists included.
    config = resources[("ConfigMap", "gpucost-config")]["data"]
    with pytest.MonkeyPatch.context() as mp:
        for key, value in config.items():
            mp.setenv(key, str(value))
        settings = Settings.from_environment()
    assert settings.aws_regions == tuple(config["GPUCOST_AWS_REGIONS"].split(","))
    for workload in _workloads():
        pod = _pod_spec(workload)
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for container in pod["containers"]:
            for source in container.get("envFrom", []):
                ref = source.get("configMapRef") or source.get("secretRef")
                assert ref["name"] in provided or ref.get("optional") is True, ref
            for env in container.get("env", []):
                if env["name"].startswith("GPUCOST_"):
                    assert env["name"] in known, env
            for mount in container.get("volumeMounts", []):
                volume = volumes[mount["name"]]
                if "secret" in volume:
                    assert volume["secret"].get("optional") is True or volume["secret"]["secretName"] in provided
        sourced = {
            key
            for c in pod["containers"]
            for s in c.get("envFrom", [])
            for key in provided.get((s.get("configMapRef") or s.get("secretRef"))["name"], set())
        }
        assert "GPUCOST_DB_URL" in sourced, workload["metadata"]["name"]


def test_migration_job_opens_the_store_and_cronjob_refreshes() -> None:
    job = _docs(K8S / "migrate-job.yaml")[0]
    assert job["kind"] == "Job"
    (container,) = _pod_spec(job)["containers"]
    assert container["args"][:2] == ["gpucost", "prices"]
    cron = _all_resources()[("CronJob", "gpucost-price-refresh")]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert _pod_spec(cron)["containers"][0]["args"] == ["gpucost", "prices", "refresh"]


# -- compose ---------------------------------------------------------------------------------


def _compose() -> dict[str, Any]:
    return yaml.safe_load((INFRA / "compose.yaml").read_text(encoding="utf-8"))


def test_compose_runs_two_replicas_a_migration_and_a_refresh_on_postgres() -> None:
    services = _compose()["services"]
    assert set(services) >= {"db", "migrate", "api", "refresh"}
    api, migrate, refresh = services["api"], services["migrate"], services["refresh"]
    assert api["deploy"]["replicas"] == 2
    # Two replicas cannot share one host port: a range with one port each.
    (published,) = api["ports"]
    low, high = re.search(r"(\d+)-(\d+):8000$", published).groups()
    assert int(high) - int(low) + 1 == api["deploy"]["replicas"]
    assert api["command"][:2] == ["gpucost", "serve"]
    assert migrate["command"][:3] == ["gpucost", "prices", "status"]
    assert refresh["command"] == ["gpucost", "prices", "refresh"]
    assert migrate["restart"] == refresh["restart"] == "no"
    assert migrate["depends_on"]["db"]["condition"] == "service_healthy"
    for svc in (api, refresh):
        assert svc["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    for svc in (api, migrate, refresh):
        assert svc["build"]["dockerfile"] == "infra/Dockerfile"
        assert svc["image"] == api["image"]
        url = svc["environment"]["GPUCOST_DB_URL"]
        assert url.startswith("postgresql+psycopg://") and "@db:5432/" in url
    assert "GPUCOST_ADMIN_TOKEN" in api["environment"] and "GPUCOST_REFRESH_CRON" in api["environment"]
    assert (INFRA / api["build"]["context"] / api["build"]["dockerfile"]).resolve() == INFRA / "Dockerfile"


def test_compose_sets_only_real_settings() -> None:
    known = _setting_env_names()
    for name, svc in _compose()["services"].items():
        for key in svc.get("environment", {}):
            if key.startswith("GPUCOST_"):
                assert key in known, f"compose service {name}: {key} is no setting"


def test_docker_compose_config_when_available() -> None:
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"], capture_output=True).returncode:
        pytest.skip("docker compose not installed (optional: compose.yaml is checked with PyYAML above)")
    env = {**os.environ, "POSTGRES_PASSWORD": "x", "GPUCOST_ADMIN_TOKEN": "y"}
    out = subprocess.run([docker, "compose", "-f", str(INFRA / "compose.yaml"), "config", "--quiet"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr


# -- Dockerfile and lock ---------------------------------------------------------------------


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", (INFRA / "Dockerfile").read_text(encoding="utf-8"))
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instruction in _dockerfile_instructions():
        if instruction[0] == "FROM":
            stages.append([])
        stages[-1].append(instruction)
    return stages


def _dockerfile_exposed_port() -> int:
    (port,) = [int(args) for word, args in _stages()[-1] if word == "EXPOSE"]
    return port


def _dockerfile_user_uid() -> int:
    users = [args for word, args in _stages()[-1] if word == "USER"]
    return int(users[-1].split(":")[0])


def test_dockerfile_is_multi_stage_non_root_with_a_healthz_check() -> None:
    stages = _stages()
    assert len(stages) >= 2
    final = stages[-1]
    assert _dockerfile_user_uid() != 0
    (health,) = [args for word, args in final if word == "HEALTHCHECK"]
    assert "/healthz" in health and f":{_dockerfile_exposed_port()}/" in health
    copies = [args for word, args in final if word == "COPY"]
    assert any(c.startswith("--from=") for c in copies)
    # The final stage installs nothing: everything comes from the build stage's environment.
    assert not [args for word, args in final if word == "RUN" and "pip" in args]
    (cmd,) = [args for word, args in final if word == "CMD"]
    assert '"serve"' in cmd and f'"{_dockerfile_exposed_port()}"' in cmd
    # A volume's mount point must exist, owned by the user, or a new volume is root's.
    runs = " ".join(args for word, args in final if word == "RUN")
    for word, args in final:
        if word == "VOLUME":
            for path in json.loads(args):
                assert f"mkdir -p {path}" in runs and "chown" in runs, path


def test_dockerfile_copies_what_the_package_needs_and_installs_from_the_lock() -> None:
    build = _stages()[0]
    copied = {src for word, args in build if word == "COPY" for src in shlex.split(args)[:-1]}
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    for pattern in packages["include"]:
        assert pattern.rstrip("*") in copied, pattern
    assert {"pyproject.toml", "README.md", "infra/requirements.lock"} <= copied
    installs = [args for word, args in build if word == "RUN" and "pip install" in args]
    assert any("-r infra/requirements.lock" in args and "--no-deps" in args for args in installs)
    assert all("--no-deps" in args for args in installs), "every install must take versions from the lock"


def _lock_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (INFRA / "requirements.lock").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version and not set(version) & set("<>=!~*,; "), f"not an exact pin: {line}"
        pins[canonicalize_name(name)] = version
    return pins


def test_lock_pins_every_runtime_dependency_within_its_range() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = _lock_pins()
    for spec in project["dependencies"] + project["optional-dependencies"]["postgres"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in infra/requirements.lock: run bash infra/lock-requirements.sh"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{req.name}=={pins[name]} in the lock is outside {req.specifier}: run bash infra/lock-requirements.sh"
        )
        for extra in req.extras:
            assert canonicalize_name(f"{req.name}-{extra}") in pins, f"{req.name}[{extra}]"


def _replay_commands(venv: Path) -> list[str]:
    """The build stage's RUN lines, aimed at ``venv`` instead of /opt/gpucost, with pip's cache
    allowed (the image disables it only to stay small)."""
    commands = []
    for word, args in _stages()[0]:
        if word != "RUN":
            continue
        command = args.replace("/opt/gpucost", str(venv)).replace("--no-cache-dir", "")
        # Compiling every module's bytecode takes about a third of the time and proves nothing.
        command = command.replace("pip install ", "pip install --no-compile ")
        command = re.sub(r"(?<![\w/])python -m venv", f"{shlex.quote(sys.executable)} -m venv", command)
        commands.append(command)
    return commands


def _replay_workdir(dest: Path) -> None:
    """The files the build stage COPYs, where Docker would put them relative to its WORKDIR."""
    for word, args in _stages()[0]:
        if word != "COPY":
            continue
        *sources, target = shlex.split(args)
        assert not target.startswith("/"), "COPY targets are relative to WORKDIR"
        into_dir = target.endswith("/") or len(sources) > 1
        for src in sources:
            origin = REPO / src
            if origin.is_dir():
                # Docker copies a directory's contents into the target directory.
                shutil.copytree(origin, dest / target, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                continue
            to = dest / target / origin.name if into_dir else dest / target
            to.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, to)


@pytest.mark.skipif(
    not (os.environ.get("CI") or os.environ.get("GPUCOST_TEST_IMAGE_INSTALL")),
    reason="about a minute of installs: runs in CI, or with GPUCOST_TEST_IMAGE_INSTALL=1",
)
def test_dockerfile_install_replays_in_a_clean_venv(tmp_path: Path) -> None:
    workdir, venv = tmp_path / "src", tmp_path / "venv"
    workdir.mkdir()
    _replay_workdir(workdir)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "PIP_NO_CACHE"))}
    for command in _replay_commands(venv):
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=workdir, env=env,
                             capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, f"{command}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    python = venv / "bin" / "python"
    frozen = subprocess.run([str(python), "-m", "pip", "freeze", "--exclude", "gpucost"],
                            capture_output=True, text=True, check=True).stdout
    installed = {canonicalize_name(n): v for n, _, v in (l.partition("==") for l in frozen.splitlines() if "==" in l)}
    assert installed == _lock_pins()
    smoke = subprocess.run(
        [str(venv / "bin" / "gpucost"), "prices", "status", "--json"], capture_output=True, text=True,
        timeout=120, env={**env, "GPUCOST_DB_URL": f"sqlite:///{tmp_path / 'smoke.sqlite'}",
                          "HOME": str(tmp_path), "AWS_EC2_METADATA_DISABLED": "true", "NO_GCE_CHECK": "true"},
    )
    assert smoke.returncode == 0, smoke.stderr
    assert '"providers"' in smoke.stdout
    imports = subprocess.run([str(python), "-c", "import psycopg, service.api.asgi"], capture_output=True, text=True)
    assert imports.returncode == 0, imports.stderr
