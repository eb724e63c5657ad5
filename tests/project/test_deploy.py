"""Structural checks of the deployment of ``serve``: Dockerfile, Kubernetes manifests, compose's scale-out profile.

Docker and Kubernetes cannot run here, so the files are parsed and checked against the code and against each
other: the container's arguments are parsed by ``serve``'s own argument parser; ports, probe paths, the
shutdown grace and the memory limit agree with ``serve``'s defaults and with what the arguments set; the image
tag is the package version everywhere; the headless Service, the tier-1 collector's DNS resolver and compose
name the same service and port. Shapes follow the Kubernetes API reference (apps/v1 Deployment, v1 Service,
kustomize.config.k8s.io/v1beta1 Kustomization), the Dockerfile reference and the Compose specification.
"""

from __future__ import annotations

import argparse
import re
import shlex
import urllib.parse
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from otel_agent_profiler._version import __version__
from otel_agent_profiler.cli import serve as serve_cli
from otel_agent_profiler.service.app import ServeConfig
from tests.support.paths import ROOT

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PYPROJECT = ROOT / "pyproject.toml"
CONFIG_DIR = ROOT / "collector-config"
KUBERNETES_DIR = CONFIG_DIR / "kubernetes"
KUSTOMIZATION = CONFIG_DIR / "kustomization.yaml"
COMPOSE_FILE = CONFIG_DIR / "compose.yaml"
TIER1_CONFIG = CONFIG_DIR / "otelcol-tier1-loadbalancing.yaml"
DEPLOYMENT = ROOT / "docs" / "deployment.md"

IMAGE = "otel-agent-profiler"
PROFILER = "agent-profiler"  # the Deployment, the headless Service, compose's service: one DNS name
UPSTREAM = "otelcol"  # tier 3: compose's collector, and the Service the manifests expect
# The probes of /health/live and /health/ready (docs/deployment.md, "Deploy serve"); /health answers without a token.
LIVENESS_PATH = "/health/live"
READINESS_PATH = "/health/ready"


@cache
def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def serve_args(argv: list[str]) -> argparse.Namespace:
    """``argv`` as ``serve`` parses it (the container's arguments after the image's entry point)."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    serve_cli.add_arguments(parser)
    return parser.parse_args([str(arg) for arg in argv])


DEFAULTS = serve_args([])


# --------------------------------------------------------------------------------------------------------------
# Dockerfile


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order; continuation lines joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, arguments = line.partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
    assert not pending, "the Dockerfile ends in a continuation line"
    return instructions


def stages() -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(base image, stage name, its instructions) per FROM."""
    found: list[tuple[str, str, list[tuple[str, str]]]] = []
    for keyword, arguments in dockerfile_instructions():
        if keyword == "FROM":
            match = re.fullmatch(r"(\S+)\s+AS\s+(\S+)", arguments, re.IGNORECASE)
            assert match, f"FROM {arguments}: every stage is named (FROM image AS name)"
            found.append((match[1], match[2], []))
        else:
            assert found, f"{keyword} before the first FROM"
            found[-1][2].append((keyword, arguments))
    return found


def exec_form(arguments: str) -> list[str]:
    value = yaml.safe_load(arguments)  # a JSON array is YAML
    assert isinstance(value, list), f"{arguments} is not in exec form (a JSON array): signals would go to a shell"
    return [str(item) for item in value]


def final_stage() -> list[tuple[str, str]]:
    return stages()[-1][2]


def instruction(stage: list[tuple[str, str]], keyword: str) -> str:
    (arguments,) = [arguments for name, arguments in stage if name == keyword]
    return arguments


def test_dockerfile_is_multi_stage_on_one_pinned_base_image() -> None:
    found = stages()
    assert len(found) >= 2, "a build stage and a runtime stage"
    bases = {base for base, _name, _instructions in found}
    assert len(bases) == 1, f"the runtime copies the build stage's virtual environment: same base image ({bases})"
    (base,) = bases
    repository, _, tag = base.partition(":")
    assert repository == "python" and tag, base
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)-slim-\w+", tag)
    assert match, f"{base}: pinned to a full Python version and a Debian release, slim"
    requires = re.search(r'^requires-python = ">=(\d+)\.(\d+)"$', PYPROJECT.read_text(encoding="utf-8"), re.M)
    assert requires, "requires-python"
    minimum = (int(requires[1]), int(requires[2]))
    assert (int(match[1]), int(match[2])) >= minimum


def test_runtime_stage_runs_serve_as_an_unprivileged_user() -> None:
    stage = final_stage()
    user = instruction(stage, "USER").split(":")
    assert user[0] not in {"root", "0"} and user[0].isdigit(), "a numeric non-root user, for runAsNonRoot"
    assert exec_form(instruction(stage, "ENTRYPOINT")) == [IMAGE, "serve"]
    script = f'{IMAGE} = "otel_agent_profiler.cli:console_main"'
    assert script in PYPROJECT.read_text(encoding="utf-8").split("[project.scripts]", 1)[1], "the entry point exists"
    args = serve_args(exec_form(instruction(stage, "CMD")))
    assert args.host == "0.0.0.0", "serve listens on 127.0.0.1 by default: unreachable from outside the container"


def test_runtime_stage_exposes_the_ports_serve_listens_on() -> None:
    exposed = {int(port.split("/")[0]) for port in instruction(final_stage(), "EXPOSE").split()}
    assert exposed == {DEFAULTS.grpc_port, DEFAULTS.http_port}


def test_only_the_runtime_dependencies_reach_the_final_image() -> None:
    build_name = stages()[0][1]
    build = stages()[0][2]
    runs = [shlex.split(arguments) for keyword, arguments in build if keyword == "RUN"]
    installs = [words for words in runs if "pip" in words and "install" in words]
    assert len(installs) == 1, runs
    words = installs[0]
    assert "." in words and not any("[" in word for word in words), "the package without extras (no dev tools)"
    assert "--constraint" in words and words[words.index("--constraint") + 1] == "constraints.txt"
    # pip takes --python before its subcommand; the environment it installs into has no pip of its own.
    assert words.index("--python") < words.index("install")
    environment = str(Path(words[words.index("--python") + 1]).parent.parent)
    assert "--without-pip" in words and words[words.index("--without-pip") + 1] == environment
    runtime = final_stage()
    copied = [arguments.split() for keyword, arguments in runtime if keyword == "COPY"]
    assert [environment, environment] in [copy[1:] for copy in copied], "the environment is what the runtime gets"
    assert not [arguments for keyword, arguments in runtime if keyword == "RUN" and "pip" in arguments]
    copies = [arguments for keyword, arguments in runtime if keyword == "COPY"]
    assert copies and all(copy.startswith(f"--from={build_name} ") for copy in copies), copies


def _dockerignore_includes(path: str) -> bool:
    """Whether ``path`` stays in the build context (last matching line wins, as in Docker)."""
    included = True
    for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        if pattern == "*" or path == pattern or path.startswith(pattern + "/"):
            included = negated
    return included


def test_build_stage_copies_files_that_exist_and_the_context_keeps() -> None:
    copies = [arguments for keyword, arguments in stages()[0][2] if keyword == "COPY"]
    sources = [source for copy in copies for source in copy.split()[:-1] if not source.startswith("--")]
    assert {"pyproject.toml", "constraints.txt", "otel_agent_profiler"} <= set(sources)
    for source in sources:
        assert (ROOT / source).exists(), source
        assert _dockerignore_includes(source), f".dockerignore leaves {source} out of the build context"
    for kept_out in ("tests", "benchmarks", ".venv", "test-artifacts", "demo"):
        assert not _dockerignore_includes(kept_out), f".dockerignore lets {kept_out} into the build context"


# --------------------------------------------------------------------------------------------------------------
# Kubernetes


def manifests() -> dict[tuple[str, str], dict[str, Any]]:
    """(kind, name) -> object, for every file under collector-config/kubernetes/."""
    found = {}
    for path in sorted(KUBERNETES_DIR.glob("*.yaml")):
        document = load_yaml(path)
        assert {"apiVersion", "kind", "metadata"} <= set(document), path.name
        found[(document["kind"], document["metadata"]["name"])] = document
    return found


def deployment(name: str) -> dict[str, Any]:
    return manifests()[("Deployment", name)]


def container(name: str) -> dict[str, Any]:
    (only,) = deployment(name)["spec"]["template"]["spec"]["containers"]
    return only  # type: ignore[no-any-return]


def profiler_args() -> argparse.Namespace:
    return serve_args(container(PROFILER).get("args") or [])


def container_ports(name: str) -> dict[str, int]:
    return {port["name"]: port["containerPort"] for port in container(name)["ports"]}


def quantity(value: str | int) -> float:
    """A Kubernetes quantity (``500m``, ``2``, ``512Mi``, ``1Gi``) as a number (cores or bytes)."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(m|Ki|Mi|Gi)?", str(value))
    assert match, f"unsupported quantity {value!r}"
    factor = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, None: 1}[match[2]]
    return float(match[1]) * factor


def test_kustomization_lists_every_manifest_and_makes_the_tier1_configmap() -> None:
    kustomization = load_yaml(KUSTOMIZATION)
    listed = {CONFIG_DIR / resource for resource in kustomization["resources"]}
    assert listed == set(KUBERNETES_DIR.glob("*.yaml"))
    (generator,) = kustomization["configMapGenerator"]
    (entry,) = generator["files"]
    key, _, source = entry.partition("=")
    assert (CONFIG_DIR / source).resolve() == TIER1_CONFIG.resolve()
    (volume,) = deployment("otelcol-tier1")["spec"]["template"]["spec"]["volumes"]
    assert volume["configMap"]["name"] == generator["name"]
    (mount,) = container("otelcol-tier1")["volumeMounts"]
    assert mount["name"] == volume["name"]
    config_flag = [arg for arg in container("otelcol-tier1")["args"] if arg.startswith("--config=")]
    assert config_flag == [f"--config={mount['mountPath']}/{key}"]


@pytest.mark.parametrize("name", [PROFILER, "otelcol-tier1"])
def test_deployments_select_their_own_pods(name: str) -> None:
    spec = deployment(name)["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()


def test_profiler_image_is_the_package_version() -> None:
    assert container(PROFILER)["image"] == f"{IMAGE}:{__version__}"


def test_profiler_listens_on_the_ports_it_declares() -> None:
    args = profiler_args()
    assert args.host == "0.0.0.0"
    assert container_ports(PROFILER) == {"otlp-grpc": args.grpc_port, "otlp-http": args.http_port}


def test_profiler_probes_ask_serve_on_its_http_port() -> None:
    serve = container(PROFILER)
    ports = container_ports(PROFILER)
    for probe, path in (("livenessProbe", LIVENESS_PATH), ("readinessProbe", READINESS_PATH)):
        get = serve[probe]["httpGet"]
        assert get["path"] == path, probe
        assert ports[get["port"]] == profiler_args().http_port, f"{probe} on port {get['port']}"
        assert get.get("scheme", "HTTP") == "HTTP" and profiler_args().tls_cert is None
    assert profiler_args().bearer_token_file is None  # the health paths need no token anyway


def test_profiler_gets_the_time_it_needs_to_drain_on_sigterm() -> None:
    grace = deployment(PROFILER)["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    # SIGKILL comes after this: serve needs its shutdown grace, an export in flight, and the last metrics.
    assert grace >= profiler_args().shutdown_grace + ServeConfig().export_timeout_s + 5


def test_profiler_memory_limit_leaves_room_over_the_span_data_it_holds() -> None:
    resources = container(PROFILER)["resources"]
    for kind in ("cpu", "memory"):
        assert quantity(resources["requests"][kind]) <= quantity(resources["limits"][kind]), kind
    # --max-memory-mib counts serialized span bytes; the process holds several times that.
    assert quantity(resources["limits"]["memory"]) >= 4 * profiler_args().max_memory_mib * 2**20


def test_profiler_runs_as_the_images_user() -> None:
    pod = deployment(PROFILER)["spec"]["template"]["spec"]["securityContext"]
    uid = int(instruction(final_stage(), "USER").split(":")[0])
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] == uid
    assert container(PROFILER)["securityContext"]["allowPrivilegeEscalation"] is False


def _env(name: str) -> dict[str, str]:
    return {item["name"]: item.get("value", "") for item in container(name).get("env") or []}


def test_profiler_forwards_to_the_upstream_collector_over_grpc() -> None:
    env = _env(PROFILER)
    upstream = urllib.parse.urlsplit(env["OTEL_EXPORTER_OTLP_ENDPOINT"])
    assert (upstream.hostname, upstream.port) == (UPSTREAM, DEFAULTS.grpc_port)
    assert "OTEL_EXPORTER_OTLP_PROTOCOL" not in env  # gRPC: serve's default protocol
    assert "--upstream" not in container(PROFILER)["args"]  # the upstream comes from the environment
    assert "service.instance.id=$(POD_NAME)" in env["OTEL_RESOURCE_ATTRIBUTES"]


def test_headless_service_selects_the_profilers_and_names_their_ports() -> None:
    service = manifests()[("Service", PROFILER)]["spec"]
    assert service["clusterIP"] == "None", "headless: DNS answers with every Pod, as the loadbalancing exporter needs"
    assert service["selector"].items() <= deployment(PROFILER)["spec"]["template"]["metadata"]["labels"].items()
    ports = container_ports(PROFILER)
    assert {port["port"]: ports[port["targetPort"]] for port in service["ports"]} == {
        DEFAULTS.grpc_port: DEFAULTS.grpc_port,
        DEFAULTS.http_port: DEFAULTS.http_port,
    }


def test_tier1_service_reaches_the_tier1_collectors() -> None:
    service = manifests()[("Service", "otelcol-tier1")]["spec"]
    assert service["selector"].items() <= deployment("otelcol-tier1")["spec"]["template"]["metadata"]["labels"].items()
    ports = container_ports("otelcol-tier1")
    receivers = load_yaml(TIER1_CONFIG)["receivers"]["otlp"]["protocols"]
    for port in service["ports"]:
        assert ports[port["targetPort"]] == port["port"]
    assert {port["port"] for port in service["ports"]} == {
        int(receivers[protocol]["endpoint"].rsplit(":", 1)[1]) for protocol in ("grpc", "http")
    }
    health = int(load_yaml(TIER1_CONFIG)["extensions"]["health_check"]["endpoint"].rsplit(":", 1)[1])
    for probe in ("livenessProbe", "readinessProbe"):
        assert ports[container("otelcol-tier1")[probe]["httpGet"]["port"]] == health


def test_tier1_collector_image_is_compose_collector_image() -> None:
    assert container("otelcol-tier1")["image"] == compose_services()[UPSTREAM]["image"]


# --------------------------------------------------------------------------------------------------------------
# Tier 1 resolves the profilers by DNS


def loadbalancing() -> dict[str, Any]:
    return load_yaml(TIER1_CONFIG)["exporters"]["loadbalancing"]  # type: ignore[no-any-return]


def test_tier1_resolves_the_headless_service_on_the_grpc_port() -> None:
    dns = loadbalancing()["resolver"]["dns"]
    assert dns["hostname"] == PROFILER == manifests()[("Service", PROFILER)]["metadata"]["name"]
    assert dns["port"] == DEFAULTS.grpc_port  # OTLP/gRPC: the loadbalancing exporter's protocol
    assert set(loadbalancing()["resolver"]) == {"dns"}, "one resolver"


def test_tier1_retries_what_a_profiler_could_not_take() -> None:
    otlp = loadbalancing()["protocol"]["otlp"]
    assert otlp["retry_on_failure"]["enabled"] is True
    assert otlp["sending_queue"]["enabled"] is True


# --------------------------------------------------------------------------------------------------------------
# compose.yaml: the scale-out profile


def compose_services() -> dict[str, dict[str, Any]]:
    return load_yaml(COMPOSE_FILE)["services"]  # type: ignore[no-any-return]


def test_compose_builds_the_image_the_manifests_run() -> None:
    service = compose_services()[PROFILER]
    assert (CONFIG_DIR / service["build"]["context"] / service["build"]["dockerfile"]).resolve() == DOCKERFILE
    assert service["image"] == container(PROFILER)["image"]
    assert service["profiles"] == ["scale-out"]


def test_compose_profiler_listens_where_tier1_and_the_healthcheck_look() -> None:
    service = compose_services()[PROFILER]
    args = serve_args(service["command"])
    assert args.host == "0.0.0.0"
    assert {int(port) for port in service["expose"]} == {args.grpc_port, args.http_port}
    assert loadbalancing()["resolver"]["dns"]["port"] == args.grpc_port
    assert service["deploy"]["replicas"] >= 2
    url = urllib.parse.urlsplit(re.search(r"http://[^'\"]+", " ".join(service["healthcheck"]["test"]))[0])  # type: ignore[index]
    assert (url.port, url.path) == (args.http_port, READINESS_PATH)


def test_compose_profiler_forwards_to_the_compose_collector() -> None:
    services = compose_services()
    service = services[PROFILER]
    upstream = urllib.parse.urlsplit(service["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"])
    assert upstream.hostname == UPSTREAM and upstream.hostname in services
    assert upstream.port == DEFAULTS.grpc_port
    assert f"{upstream.port}:{upstream.port}" in " ".join(services[UPSTREAM]["ports"])
    stop = re.fullmatch(r"(\d+)s", service["stop_grace_period"])
    assert stop and int(stop[1]) >= DEFAULTS.shutdown_grace + ServeConfig().export_timeout_s


def test_compose_tier1_runs_the_tier1_config_on_other_host_ports() -> None:
    services = compose_services()
    tier1 = services["otelcol-tier1"]
    assert tier1["profiles"] == ["scale-out"] and PROFILER in tier1["depends_on"]
    (config,) = [arg for arg in tier1["command"] if arg.startswith("--config=")]
    (volume,) = tier1["volumes"]
    source, target, _mode = volume.split(":")
    assert target == config.removeprefix("--config=") and (CONFIG_DIR / source).resolve() == TIER1_CONFIG.resolve()

    def host_ports(service: dict[str, Any]) -> set[str]:
        return {str(port).rsplit(":", 2)[-2] for port in service.get("ports") or []}

    taken = set().union(*(host_ports(other) for name, other in services.items() if name != "otelcol-tier1"))
    assert host_ports(tier1) and not host_ports(tier1) & taken


# --------------------------------------------------------------------------------------------------------------
# The documentation


def test_the_deployment_page_says_how_the_deployment_is_tested() -> None:
    page = DEPLOYMENT.read_text(encoding="utf-8")
    section = page.split("## Deploy serve", 1)[1].split("\n## ", 1)[0]
    for needle in (
        "Dockerfile",
        "kustomization.yaml",
        "scale-out",
        LIVENESS_PATH,
        READINESS_PATH,
        "tests/project/test_deploy.py",
    ):
        assert needle in section, needle
    assert "not run here" in section or "cannot run here" in section
