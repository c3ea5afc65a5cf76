"""The deployment files stay valid and name every process kind the platform has.

* docker-compose.yml, as Debian's docker-compose 1.29 resolves it;
* deploy/prometheus/prometheus.yml (the compose scrape config) and deploy/k8s/prometheus-scrape.yml, with promtool;
* deploy/k8s (a Kustomize base), with kubernetes-validate against a pinned Kubernetes version, and against the
  service registry: a Deployment per worker kind, an autoscaler on each kind's own queue, the migration Job, the
  database and Redis URLs from the Secret, and the sandbox's privileges only where nsjail runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.kernel.registry import SERVICES

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "k8s"
PROMETHEUS_CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"
PROMETHEUS_RULES = ROOT / "deploy" / "prometheus" / "rules"

# The Kubernetes version the manifests are validated against (kubernetes-validate ships its schemas). 1.31: the
# last minor before kubelets started refusing cgroup v1 nodes by default, which the sandbox needs
# (docs/deployment.md).
KUBERNETES_VERSION = "1.31.0"
# Files in deploy/k8s that are not Kubernetes objects (so not in the kustomization's resources).
NOT_OBJECTS = {"prometheus-scrape.yml", "prometheus-adapter-rules.yml"}
# Worker kinds that run nsjail: the executor (every run), the judge (the lint judge's pylint and cppcheck) and
# similarity (differential fuzzing runs both programs). Only these get the sandbox's privileges.
SANDBOXED = {"executor", "judge", "similarity"}
SECRET_NAME = "tribunal-secrets"
SECRET_ENV = ("TRIBUNAL_DATABASE_URL", "TRIBUNAL_REDIS_URL")


# ---- docker-compose.yml ------------------------------------------------------------------------------------------


def _compose_services() -> dict[str, dict[str, Any]]:
    """The services as `docker-compose config` resolves them (anchors merged), which also validates the file."""
    compose = shutil.which("docker-compose")
    assert compose, "scripts/setup.sh installs docker-compose to validate the compose file"
    result = subprocess.run(
        [compose, "-f", str(ROOT / "docker-compose.yml"), "config"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ | {"GF_SECURITY_ADMIN_PASSWORD": "chosen-by-the-operator"},
    )
    assert result.returncode == 0, result.stderr
    services: dict[str, dict[str, Any]] = yaml.safe_load(result.stdout)["services"]
    return services


def test_grafana_needs_a_chosen_password_and_unauthenticated_ports_stay_on_loopback() -> None:
    compose = shutil.which("docker-compose")
    assert compose
    env = {key: value for key, value in os.environ.items() if key != "GF_SECURITY_ADMIN_PASSWORD"}
    unset = subprocess.run(
        [compose, "-f", str(ROOT / "docker-compose.yml"), "config"], capture_output=True, text=True, env=env
    )
    assert unset.returncode != 0 and "GF_SECURITY_ADMIN_PASSWORD" in unset.stderr
    services = _compose_services()
    for name in ("prometheus", "grafana"):
        for port in services[name]["ports"]:
            published = port if isinstance(port, str) else f"{port.get('host_ip', '')}:{port['published']}"
            assert str(published).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_compose_file_is_valid_and_runs_every_worker_kind() -> None:
    services = _compose_services()
    commands = {name: " ".join(spec.get("command", [])) for name, spec in services.items()}
    # One compose service per registered worker kind, each running that kind.
    assert {"postgres", "redis", "gateway", "prometheus", "grafana", *SERVICES} <= set(services)
    for kind in SERVICES:
        assert commands[kind] == f"tribunal worker {kind}"


def test_every_long_running_service_restarts_and_one_shots_do_not() -> None:
    services = _compose_services()
    # A one-shot is a service others wait on to complete (migrate); everything else runs until stopped.
    one_shots = {
        name
        for spec in services.values()
        for name, condition in (spec.get("depends_on") or {}).items()
        if condition.get("condition") == "service_completed_successfully"
    }
    assert one_shots == {"migrate"}
    for name, spec in services.items():
        assert "restart" in spec, f"{name} has no restart policy"
        if name in one_shots:
            assert spec["restart"] == "no", f"{name} is a one-shot: a restart would loop a failed run"
        else:
            assert spec["restart"] in ("unless-stopped", "on-failure"), f"{name}: restart {spec['restart']!r}"
    # The gateway, every worker and the monitoring stack say whether they are up; dependents and operators read it.
    for name in ("gateway", *SERVICES, "prometheus", "grafana"):
        assert services[name].get("healthcheck", {}).get("test"), f"{name} has no healthcheck"


def _mounts(spec: dict[str, Any]) -> dict[str, str]:
    """container path -> host path (relative to the repository) of a compose service's bind mounts."""
    mounts = {}
    for volume in spec.get("volumes", []):
        source, target, *_ = volume.split(":") if isinstance(volume, str) else (volume["source"], volume["target"])
        if source.startswith("/"):
            mounts[target] = Path(source).relative_to(ROOT).as_posix()
    return mounts


def test_prometheus_and_grafana_read_their_config_from_deploy() -> None:
    services = _compose_services()
    prometheus = _mounts(services["prometheus"])
    assert prometheus["/etc/prometheus/prometheus.yml"] == "deploy/prometheus/prometheus.yml"
    assert prometheus["/etc/prometheus/rules"] == "deploy/prometheus/rules"
    assert services["prometheus"].get("secrets"), "Prometheus needs the metrics key to scrape the gateway"
    grafana = _mounts(services["grafana"])
    assert grafana["/etc/grafana/provisioning"] == "deploy/grafana/provisioning"
    assert grafana["/var/lib/grafana/dashboards"] == "deploy/grafana/dashboards"


def test_only_the_workers_that_run_nsjail_are_privileged_in_compose() -> None:
    services = _compose_services()
    privileged = {name for name, spec in services.items() if spec.get("privileged")}
    assert privileged == SANDBOXED
    for name in SANDBOXED:
        assert str(services[name].get("user")) == "0", f"{name}: nsjail needs root in its container"


# ---- Prometheus ----------------------------------------------------------------------------------------------------


def _promtool() -> str:
    promtool = shutil.which("promtool")
    assert promtool, "scripts/setup.sh installs prometheus (with promtool) to check the scrape configs"
    return promtool


def _promtool_check(config: dict[str, Any], tmp_path: Path) -> None:
    """`promtool check config` on `config`, whose container paths were made to point into `tmp_path` or the
    repository (promtool opens the credentials and rule files the config names)."""
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    result = subprocess.run([_promtool(), "check", "config", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def _local_paths(config: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """The config with its credentials files replaced by a temporary file and its rule files by the repository's
    deploy/prometheus/rules (so promtool also checks the rules compose mounts)."""
    credentials = tmp_path / "metrics.key"
    credentials.write_text("placeholder\n")
    for job in config["scrape_configs"]:
        if "credentials_file" in job.get("authorization", {}):
            job["authorization"]["credentials_file"] = str(credentials)
    assert config.get("rule_files") == ["/etc/prometheus/rules/*.yml"]
    config["rule_files"] = [str(PROMETHEUS_RULES / "*.yml")]
    return config


def _compose_prometheus() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    return config


def test_compose_prometheus_config_passes_promtool(tmp_path: Path) -> None:
    _promtool_check(_local_paths(_compose_prometheus(), tmp_path), tmp_path)


def test_promtool_check_can_fail(tmp_path: Path) -> None:
    """A control: the check above would notice a broken config (a relabel action that does not exist)."""
    config = _local_paths(_compose_prometheus(), tmp_path)
    config["scrape_configs"][0]["relabel_configs"] = [{"action": "no-such-action"}]
    with pytest.raises(AssertionError):
        _promtool_check(config, tmp_path)


def test_compose_prometheus_scrapes_every_replica_of_every_kind() -> None:
    jobs = {job["job_name"]: job for job in _compose_prometheus()["scrape_configs"]}
    # Job names are tribunal-<kind>: dashboards and alert rules select on them.
    assert set(jobs) == {"tribunal-gateway", *(f"tribunal-{kind}" for kind in SERVICES)}
    assert jobs["tribunal-gateway"]["authorization"]["credentials_file"] == "/run/secrets/tribunal_metrics_key"
    services = _compose_services()
    assert services["prometheus"]["secrets"][0]["source"] == "tribunal_metrics_key"
    for kind in SERVICES:
        job = jobs[f"tribunal-{kind}"]
        # DNS discovery (one A record per container of the compose service), never a single static target:
        # `--scale kind=N` must give N instances, each process's own registry.
        assert "static_configs" not in job, f"tribunal-{kind}: a static target mixes the replicas"
        [discovery] = job["dns_sd_configs"]
        assert discovery["names"] == [kind]
        assert discovery["type"] == "A"
        environment = services[kind]["environment"]
        assert discovery["port"] == int(environment["TRIBUNAL_WORKER_TELEMETRY_PORT"]), kind
        assert environment["TRIBUNAL_WORKER_TELEMETRY_HOST"] == "0.0.0.0", f"{kind} listens on loopback only"


def _k8s_scrape() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((K8S / "prometheus-scrape.yml").read_text())
    return config


def test_k8s_prometheus_scrape_config_passes_promtool(tmp_path: Path) -> None:
    """Debian's promtool is built without Kubernetes discovery, so each kubernetes_sd_configs block is checked
    here (role and namespaces) and replaced by a static target for promtool, which checks everything else
    (relabelling, authorization, the rules)."""
    config = _local_paths(_k8s_scrape(), tmp_path)
    for job in config["scrape_configs"]:
        [discovery] = job.pop("kubernetes_sd_configs")
        assert discovery["role"] == "pod", "every replica is its own target: discover pods, not services"
        assert discovery["namespaces"]["names"] == ["tribunal"]
        job["static_configs"] = [{"targets": ["discovered:1"]}]
    _promtool_check(config, tmp_path)


def _relabel(rules: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, str] | None:
    """Prometheus' relabelling (the actions the scrape config uses) applied to a target's labels; None when dropped."""
    labels = dict(labels)
    for rule in rules:
        action = rule.get("action", "replace")
        value = rule.get("separator", ";").join(labels.get(name, "") for name in rule.get("source_labels", []))
        match = re.fullmatch(rule.get("regex", "(.*)"), value)
        if action == "keep" and not match:
            return None
        if action == "drop" and match:
            return None
        if action == "replace" and match:
            replacement = rule.get("replacement", "$1")
            # Prometheus writes a group as $1 or ${1}; Python's expand() as \g<1>.
            labels[rule["target_label"]] = match.expand(re.sub(r"\$\{?(\d+)\}?", r"\\g<\1>", replacement))
        assert action in ("keep", "drop", "replace"), f"the test does not know relabel action {action!r}"
    return labels


def _pod_targets(deployment: dict[str, Any]) -> Iterator[dict[str, str]]:
    """The discovery labels Prometheus' pod role gives each container port of a running pod of `deployment`."""
    pod = deployment["spec"]["template"]
    meta = {"__meta_kubernetes_namespace": "tribunal", "__meta_kubernetes_pod_phase": "Running"}
    meta["__meta_kubernetes_pod_name"] = f"{deployment['metadata']['name']}-0"
    for key, value in pod["metadata"].get("labels", {}).items():
        meta["__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", key)] = value
    for key, value in pod["metadata"].get("annotations", {}).items():
        meta["__meta_kubernetes_pod_annotation_" + re.sub(r"[^a-zA-Z0-9_]", "_", key)] = value
    for container in pod["spec"]["containers"]:
        for port in container.get("ports", []):
            yield {**meta, "__meta_kubernetes_pod_container_port_name": port.get("name", "")}


def test_k8s_prometheus_gives_each_kind_its_job_name() -> None:
    """Every pod of every Deployment, through each scrape job's relabelling: the gateway's pods land in
    tribunal-gateway (with the key), each worker kind's in tribunal-<kind>, once each, on its metrics port."""
    jobs = _k8s_scrape()["scrape_configs"]
    for name, deployment in _deployments().items():
        scraped = []
        for job in jobs:
            for target in _pod_targets(deployment):
                labels = _relabel(job.get("relabel_configs", []), {"job": job["job_name"], **target})
                if labels is not None:
                    scraped.append((job, labels))
        assert len(scraped) == 1, f"{name} is scraped {len(scraped)} times"
        [(job, labels)] = scraped
        assert labels["job"] == f"tribunal-{name}"
        assert labels["instance"] == f"tribunal-{name}-0", "each pod is its own instance"
        if name == "gateway":
            assert job["authorization"]["credentials_file"], "the gateway's /metrics needs a key"
            assert labels["__meta_kubernetes_pod_container_port_name"] == "http"
        else:
            assert labels["__meta_kubernetes_pod_container_port_name"] == "metrics"


# ---- deploy/k8s ----------------------------------------------------------------------------------------------------


def _kustomization() -> dict[str, Any]:
    kustomization: dict[str, Any] = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    return kustomization


def _objects() -> list[dict[str, Any]]:
    """Every Kubernetes object the kustomization's resources hold."""
    return [
        doc
        for resource in _kustomization()["resources"]
        for doc in yaml.safe_load_all((K8S / resource).read_text())
        if doc
    ]


def _of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {obj["metadata"]["name"]: obj for obj in _objects() if obj["kind"] == kind}


def _deployments() -> dict[str, dict[str, Any]]:
    """Deployments by the component they run (their app.kubernetes.io/component label)."""
    deployments = {}
    for obj in _of_kind("Deployment").values():
        component = obj["metadata"]["labels"]["app.kubernetes.io/component"]
        assert component not in deployments, f"two Deployments run {component}"
        assert obj["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == component
        deployments[component] = obj
    return deployments


def _pod_specs() -> dict[str, dict[str, Any]]:
    """The pod spec of every Deployment (by component) and of the migration Job ("migrate")."""
    pods = {name: d["spec"]["template"]["spec"] for name, d in _deployments().items()}
    for job in _of_kind("Job").values():
        pods[job["metadata"]["labels"]["app.kubernetes.io/component"]] = job["spec"]["template"]["spec"]
    return pods


def test_kustomization_lists_every_manifest() -> None:
    files = {path.name for path in K8S.iterdir() if path.is_file()}
    resources = _kustomization()["resources"]
    assert len(resources) == len(set(resources)), "a resource is listed twice"
    # Every file is the kustomization, one of its resources, or a known non-object (a Prometheus config).
    assert set(resources) == files - {"kustomization.yaml"} - NOT_OBJECTS
    assert NOT_OBJECTS <= files
    for name in NOT_OBJECTS:
        assert "apiVersion" not in yaml.safe_load((K8S / name).read_text()), f"{name} looks like an object"


def _kubernetes_validate(*paths: Path) -> subprocess.CompletedProcess[str]:
    validate = Path(sys.executable).with_name("kubernetes-validate")
    assert validate.exists(), "kubernetes-validate is a dev dependency (pyproject.toml)"
    command = [str(validate), "--strict", "-k", KUBERNETES_VERSION, *map(str, paths)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_manifests_are_valid_kubernetes_objects() -> None:
    result = _kubernetes_validate(*(K8S / resource for resource in _kustomization()["resources"]))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # kubernetes-validate only warns about a kind it has no schema for (a CRD): every object here must be one it
    # knows, or it would pass unchecked.
    assert "Couldn't find schema" not in output, output
    assert output.count("passed for resource") == len(_objects()), output


def test_kubernetes_validate_rejects_a_wrong_manifest(tmp_path: Path) -> None:
    """A control: strict validation catches a misspelt field in an otherwise valid Deployment."""
    deployment = _deployments()["executor"]
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["prot"] = "metrics"
    path = tmp_path / "wrong.yaml"
    path.write_text(yaml.safe_dump(deployment))
    assert _kubernetes_validate(path).returncode != 0


def test_a_deployment_runs_the_gateway_and_each_worker_kind() -> None:
    deployments = _deployments()
    assert set(deployments) == {"gateway", *SERVICES}
    for name, deployment in deployments.items():
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        command = " ".join(container["command"])
        assert command == (
            "tribunal gateway --host 0.0.0.0 --port 8000" if name == "gateway" else f"tribunal worker {name}"
        )
        resources = container["resources"]
        for resource in ("cpu", "memory"):
            assert resources["requests"][resource] and resources["limits"][resource], f"{name}: {resource}"


def _probe_path(container: dict[str, Any], probe: str) -> tuple[str, str]:
    get = container[probe]["httpGet"]
    return get["path"], get["port"]


def test_probes_and_metrics_ports() -> None:
    config = _of_kind("ConfigMap")["tribunal-config"]["data"]
    for name, deployment in _deployments().items():
        pod = deployment["spec"]["template"]
        [container] = pod["spec"]["containers"]
        ports = {port["name"]: port["containerPort"] for port in container["ports"]}
        if name == "gateway":
            assert ports == {"http": 8000}
            assert _probe_path(container, "readinessProbe") == ("/readyz", "http")
            assert _probe_path(container, "livenessProbe") == ("/healthz", "http")
            continue
        # A worker serves /metrics on its telemetry port, bound to the pod's address (not loopback).
        env = {**config, **{e["name"]: e.get("value") for e in container.get("env", [])}}
        assert ports == {"metrics": int(env["TRIBUNAL_WORKER_TELEMETRY_PORT"])}, name
        assert env["TRIBUNAL_WORKER_TELEMETRY_HOST"] == "0.0.0.0", name
        assert any(ref["configMapRef"]["name"] == "tribunal-config" for ref in container["envFrom"]), name
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            assert _probe_path(container, probe) == ("/metrics", "metrics"), f"{name} {probe}"
        annotations = pod["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/port"] == str(ports["metrics"])


def _adapter_queries() -> dict[str, str]:
    """External metric name -> the PromQL prometheus-adapter answers it with."""
    rules = yaml.safe_load((K8S / "prometheus-adapter-rules.yml").read_text())["rules"]["external"]
    return {rule["name"]["as"]: rule["metricsQuery"] for rule in rules}


def test_each_worker_kind_scales_on_its_own_queue() -> None:
    autoscalers = {hpa["spec"]["scaleTargetRef"]["name"]: hpa for hpa in _of_kind("HorizontalPodAutoscaler").values()}
    deployments = _deployments()
    queries = _adapter_queries()
    assert set(autoscalers) == {deployments[kind]["metadata"]["name"] for kind in SERVICES}
    for kind, service in SERVICES.items():
        hpa = autoscalers[deployments[kind]["metadata"]["name"]]["spec"]
        assert hpa["scaleTargetRef"]["kind"] == "Deployment"
        # An alert fires when a worker kind has no live process: never scale to zero.
        assert hpa["minReplicas"] >= 1
        assert hpa["maxReplicas"] > hpa["minReplicas"]
        [metric] = hpa["metrics"]
        assert metric["type"] == "External"
        query = queries[metric["external"]["metric"]["name"]]
        # The gateway's gauge for this kind's queue, and no other queue's.
        assert re.search(r"\btribunal_queue_depth\{", query), query
        assert re.findall(r'queue="([^"]+)"', query) == [service.queue], f"{kind}: {query}"
        assert float(metric["external"]["target"]["averageValue"]) > 0


def test_the_migration_job_runs_migrate_once() -> None:
    [job] = _of_kind("Job").values()
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["command"] == ["tribunal", "migrate"]
    # A failed migration waits for an operator; it is not retried against a half-migrated database.
    assert pod["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] == 0


def test_database_and_redis_urls_come_from_the_secret() -> None:
    [secret] = [s for name, s in _of_kind("Secret").items() if name == SECRET_NAME]
    keys = set(secret["stringData"])
    # The shipped values are placeholders nobody can mistake for a working deployment.
    for value in secret["stringData"].values():
        assert "REPLACE-ME" in value and ".invalid" in value, value
    for name, pod in _pod_specs().items():
        [container] = pod["containers"]
        env = {e["name"]: e for e in container.get("env", [])}
        for variable in SECRET_ENV:
            reference = env[variable]["valueFrom"]["secretKeyRef"]
            assert reference["name"] == SECRET_NAME and reference["key"] in keys, f"{name} {variable}"
            assert "value" not in env[variable]
    # Nowhere else: not in a ConfigMap, not as a literal value.
    for config in _of_kind("ConfigMap").values():
        assert not set(SECRET_ENV) & set(config.get("data", {}))
    assert set(_pod_specs()) == {"gateway", "migrate", *SERVICES}


def test_only_the_sandbox_workers_are_privileged_and_only_on_their_node_pool() -> None:
    for name, pod in _pod_specs().items():
        [container] = pod["containers"]
        security = container["securityContext"]
        assert pod["automountServiceAccountToken"] is False, name
        assert not pod.get("hostPID") and not pod.get("hostNetwork") and not pod.get("hostIPC"), name
        assert not any("hostPath" in volume for volume in pod.get("volumes", [])), name
        if name in SANDBOXED:
            assert security["privileged"] is True, f"{name}: nsjail needs it (docs/deployment.md)"
            assert pod["securityContext"]["runAsUser"] == 0
            assert pod["nodeSelector"] == {"tribunal.dev/sandbox": "true"}
            assert {t["key"] for t in pod["tolerations"]} == {"tribunal.dev/sandbox"}
        else:
            assert not security.get("privileged"), name
            assert pod["securityContext"]["runAsNonRoot"] is True, name
            assert pod["securityContext"]["runAsUser"] != 0, name
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["readOnlyRootFilesystem"] is True, name
            assert security["capabilities"]["drop"] == ["ALL"] and not security["capabilities"].get("add"), name
            assert "nodeSelector" not in pod and "tolerations" not in pod, f"{name} has no business on the pool"


def test_the_network_policy_covers_every_worker_kind() -> None:
    [policy] = _of_kind("NetworkPolicy").values()
    expressions = {e["key"]: e["values"] for e in policy["spec"]["podSelector"]["matchExpressions"]}
    assert sorted(expressions["app.kubernetes.io/component"]) == sorted(SERVICES)
    [rule] = policy["spec"]["ingress"]
    assert [port["port"] for port in rule["ports"]] == ["metrics"]
