"""Structural checks of collector-config/ (collector, Tempo, Prometheus, Grafana and compose files).

The backends these files configure (otelcol-contrib, Tempo, Grafana, Jaeger, Docker) cannot run here, so the
files are checked for what would break them silently: components defined but not wired (or wired but not
defined), ports and host names that disagree between files, and dashboard queries naming metrics, labels or
span attributes the profiler does not produce. Metric and attribute names are read from the code
(``profile_metrics.METRICS``, ``attributes.SPAN_ATTRIBUTES``/``ROOT_ATTRIBUTES``) and translated to Prometheus
names here with the rules of the collector's ``prometheus`` exporter (collector-config/README.md).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.parse
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from otel_agent_profiler.live.attributes import ROOT_ATTRIBUTES, SPAN_ATTRIBUTES
from otel_agent_profiler.live.profile_metrics import METRICS
from tests.support.paths import ROOT

CONFIG_DIR = ROOT / "collector-config"
COMPOSE_FILE = CONFIG_DIR / "compose.yaml"
TEMPO_FILE = CONFIG_DIR / "tempo.yaml"
PROMETHEUS_FILE = CONFIG_DIR / "prometheus.yml"
DATASOURCES_FILE = CONFIG_DIR / "grafana/provisioning/datasources/datasources.yaml"
DASHBOARD_PROVIDERS_FILE = CONFIG_DIR / "grafana/provisioning/dashboards/dashboards.yaml"
DASHBOARD_FILE = CONFIG_DIR / "grafana/dashboards/agent-profiler.json"
README_FILE = CONFIG_DIR / "README.md"

COLLECTOR_CONFIGS = sorted(CONFIG_DIR.glob("otelcol-*.yaml"))
TEMPO_CONFIG = CONFIG_DIR / "otelcol-tempo-prometheus.yaml"
JAEGER_CONFIG = CONFIG_DIR / "otelcol-jaeger.yaml"
TIER1_CONFIG = CONFIG_DIR / "otelcol-tier1-loadbalancing.yaml"

COMPONENT_KINDS = ("receivers", "processors", "exporters", "connectors")
OTLP_GRPC_PORT = 4317
OTLP_HTTP_PORT = 4318
# Labels a scraped series may carry besides its attributes: the bucket bound, and job/instance (from the
# resource's service.name and service.instance.id, or added by Prometheus).
EXTRA_LABELS = {"le", "job", "instance"}


@cache
def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@cache
def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------------------------------------------
# OTLP -> Prometheus name translation of the collector's prometheus exporter.
#
# exporter/prometheusexporter (collector.go) builds names with github.com/prometheus/otlptranslator's
# MetricNamer and LabelNamer; by default (add_metric_suffixes: true, no translation_strategy) with suffixes and
# with escaping to underscores (UnderscoreEscapingWithSuffixes). The rules below are those of
# otlptranslator's normalizeName/buildUnitSuffixes (metric_namer.go, unit_namer.go) and LabelNamer.Build
# (label_namer.go, strconv.go), the same as the older pkg/translator/prometheus of collector-contrib.

_UNITS = {
    "d": "days",
    "h": "hours",
    "min": "minutes",
    "s": "seconds",
    "ms": "milliseconds",
    "us": "microseconds",
    "ns": "nanoseconds",
    "By": "bytes",
    "KiBy": "kibibytes",
    "MiBy": "mebibytes",
    "GiBy": "gibibytes",
    "TiBy": "tibibytes",
    "KBy": "kilobytes",
    "MBy": "megabytes",
    "GBy": "gigabytes",
    "TBy": "terabytes",
    "m": "meters",
    "V": "volts",
    "A": "amperes",
    "J": "joules",
    "W": "watts",
    "g": "grams",
    "Cel": "celsius",
    "Hz": "hertz",
    "1": "",
    "%": "percent",
}
_PER_UNITS = {"s": "second", "m": "minute", "h": "hour", "d": "day", "w": "week", "mo": "month", "y": "year"}

# OTel instrument -> OTLP point kind the SDK exports (what the translator's type-dependent rules look at).
_POINT_KIND = {
    "counter": "monotonic_sum",
    "observable_counter": "monotonic_sum",
    "up_down_counter": "sum",
    "observable_up_down_counter": "sum",
    "gauge": "gauge",
    "observable_gauge": "gauge",
    "histogram": "histogram",
}


def _unit_suffixes(unit: str) -> tuple[str, str]:
    """Main and per-unit suffixes: mapped UCUM units; annotations in braces (``{token}``) give nothing."""
    main, _, per = unit.partition("/")
    main = main.strip()
    per = per.strip()
    main_suffix = "" if not main or "{" in main or "}" in main else _UNITS.get(main, main)
    per_suffix = ""
    if per and "{" not in per and "}" not in per:
        per_suffix = "per_" + _PER_UNITS.get(per, per)
    return main_suffix, per_suffix


def _clean_unit(suffix: str) -> str:
    return re.sub(r"__+", "_", re.sub(r"[^a-zA-Z0-9:]", "_", suffix)).removeprefix("_")


def prometheus_metric_name(name: str, unit: str, instrument: str) -> str:
    kind = _POINT_KIND[instrument]
    tokens = [token for token in re.split(r"[^a-zA-Z0-9:]+", name) if token]
    main, per = (_clean_unit(suffix) for suffix in _unit_suffixes(unit))
    if main in tokens:
        main = ""
    if per == "per_":
        per = ""
    else:
        per = per.removesuffix("_")
        if per in tokens:
            per = ""
    if per:
        main = main.removesuffix("_")
    tokens += [suffix for suffix in (main, per) if suffix]
    if kind == "monotonic_sum":
        tokens = [token for token in tokens if token != "total"] + ["total"]
    if unit == "1" and kind == "gauge":  # `_ratio` for gauges only, not for histograms or sums
        tokens = [token for token in tokens if token != "ratio"] + ["ratio"]
    joined = "_".join(tokens)
    return "_" + joined if joined[:1].isdigit() else joined


def prometheus_label(key: str) -> str:
    label = re.sub(r"[^a-zA-Z0-9_]", "_", key)
    if label[:1].isdigit():
        return "key_" + label
    if label.startswith("_") and not label.startswith("__"):
        return "key" + label
    return label


def series_names(name: str, instrument: str) -> set[str]:
    base = prometheus_metric_name(name, METRICS[name][1], instrument)
    if instrument == "histogram":
        return {f"{base}_bucket", f"{base}_sum", f"{base}_count"}
    return {base}


@cache
def series_to_metric() -> dict[str, str]:
    """Every Prometheus series name of the profile metrics -> the OTel metric name in METRICS."""
    table: dict[str, str] = {}
    for name, (instrument, _unit, _keys) in METRICS.items():
        for series in series_names(name, instrument):
            assert series not in table, f"{name} and {table[series]} both become {series}"
            table[series] = name
    return table


def allowed_labels(metric: str) -> set[str]:
    return {prometheus_label(key) for key in METRICS[metric][2]} | EXTRA_LABELS


@pytest.mark.parametrize(
    ("name", "unit", "instrument", "expected"),
    [
        # Examples of otlptranslator's and collector-contrib's documentation of the rules.
        ("http.server.request.duration", "s", "histogram", "http_server_request_duration_seconds"),
        ("memory.usage", "By", "gauge", "memory_usage_bytes"),
        ("system.filesystem.usage", "By", "gauge", "system_filesystem_usage_bytes"),
        ("requests.count", "1", "counter", "requests_count_total"),
        ("system.memory.utilization", "1", "gauge", "system_memory_utilization_ratio"),
        ("system.network.dropped", "{packets}", "counter", "system_network_dropped_total"),
        ("system.network.dropped", "packets", "gauge", "system_network_dropped_packets"),
        ("network.io", "By/s", "gauge", "network_io_bytes_per_second"),
        ("process.cpu.time", "s", "counter", "process_cpu_time_seconds_total"),
        ("share", "1", "histogram", "share"),
        ("http.requests.total", "{request}", "counter", "http_requests_total"),
    ],
)
def test_translation_rules_match_documented_examples(name: str, unit: str, instrument: str, expected: str) -> None:
    assert prometheus_metric_name(name, unit, instrument) == expected


def test_label_translation() -> None:
    assert prometheus_label("gen_ai.token.type") == "gen_ai_token_type"
    assert prometheus_label("agent_profiler.on_critical_path") == "agent_profiler_on_critical_path"
    assert prometheus_label("123invalid") == "key_123invalid"
    assert prometheus_label("_private") == "key_private"
    assert prometheus_label("__reserved__") == "__reserved__"


def test_python_prometheus_exporter_gives_the_same_names_for_our_metrics() -> None:
    """Cross-check with an independent implementation of the spec: opentelemetry-exporter-prometheus."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from prometheus_client import REGISTRY, generate_latest

    reader = PrometheusMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    try:
        meter = provider.get_meter("collector-config-test")
        for name, (instrument, unit, keys) in METRICS.items():
            attributes = dict.fromkeys(keys, "x")
            if instrument == "histogram":
                meter.create_histogram(name, unit=unit).record(1.0, attributes)
            elif instrument == "counter":
                meter.create_counter(name, unit=unit).add(1, attributes)
            else:  # pragma: no cover - a new instrument kind: extend this test
                pytest.fail(f"no cross-check for instrument {instrument!r} of {name}")
        exposition = generate_latest(REGISTRY).decode()
    finally:
        provider.shutdown()  # the reader's shutdown unregisters it from REGISTRY
    families = dict(re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.MULTILINE))
    for name, (instrument, unit, _keys) in METRICS.items():
        expected = prometheus_metric_name(name, unit, instrument)
        assert families.get(expected) == instrument, f"{name}: {expected} not among {sorted(families)}"


def test_readme_lists_every_translated_name() -> None:
    readme = README_FILE.read_text(encoding="utf-8")
    for name, (instrument, unit, keys) in METRICS.items():
        prom_name = prometheus_metric_name(name, unit, instrument)
        assert f"`{prom_name}`" in readme, f"README.md does not give the Prometheus name of {name}: {prom_name}"
        for key in keys:
            assert f"`{prometheus_label(key)}`" in readme, f"README.md does not give the label of {key}"


# --------------------------------------------------------------------------------------------------------------
# Every file parses


def test_every_yaml_and_json_file_parses() -> None:
    yaml_files = sorted([*CONFIG_DIR.rglob("*.yaml"), *CONFIG_DIR.rglob("*.yml")])
    json_files = sorted(CONFIG_DIR.rglob("*.json"))
    expected = {
        COMPOSE_FILE,
        TEMPO_FILE,
        PROMETHEUS_FILE,
        DATASOURCES_FILE,
        DASHBOARD_PROVIDERS_FILE,
        TEMPO_CONFIG,
        JAEGER_CONFIG,
        TIER1_CONFIG,
    }
    assert expected <= set(yaml_files)
    assert DASHBOARD_FILE in json_files
    for path in yaml_files:
        assert isinstance(load_yaml(path), dict), f"{path.relative_to(ROOT)} is not a YAML mapping"
    for path in json_files:
        assert isinstance(load_json(path), dict), f"{path.relative_to(ROOT)} is not a JSON object"


# --------------------------------------------------------------------------------------------------------------
# Collector configurations


def _ids(paths: list[Path]) -> list[str]:
    return [path.name for path in paths]


def _defined(config: dict[str, Any], kind: str) -> set[str]:
    return set(config.get(kind) or {})


def _component_type(component_id: str) -> str:
    return component_id.split("/", 1)[0]


def _host_port(endpoint: str) -> tuple[str, int]:
    parsed = urllib.parse.urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
    assert parsed.hostname and parsed.port, f"no host:port in {endpoint!r}"
    return parsed.hostname, parsed.port


def test_the_expected_collector_configs_exist() -> None:
    assert {TEMPO_CONFIG, JAEGER_CONFIG, TIER1_CONFIG} <= set(COLLECTOR_CONFIGS)


@pytest.mark.parametrize("path", COLLECTOR_CONFIGS, ids=_ids(COLLECTOR_CONFIGS))
def test_pipelines_use_exactly_the_defined_components(path: Path) -> None:
    config = load_yaml(path)
    pipelines = config["service"]["pipelines"]
    assert pipelines, "no pipelines"
    used: dict[str, set[str]] = {kind: set() for kind in COMPONENT_KINDS}
    connector_roles: dict[str, set[str]] = {connector: set() for connector in _defined(config, "connectors")}
    for pipeline_id, pipeline in pipelines.items():
        assert _component_type(pipeline_id) in {"traces", "metrics", "logs"}, pipeline_id
        assert pipeline.get("receivers"), f"pipeline {pipeline_id} has no receivers"
        assert pipeline.get("exporters"), f"pipeline {pipeline_id} has no exporters"
        for kind in COMPONENT_KINDS:
            for component in pipeline.get(kind) or []:
                # A connector is the exporter of one pipeline and the receiver of another.
                if kind in ("receivers", "exporters") and component in connector_roles:
                    used["connectors"].add(component)
                    connector_roles[component].add(kind)
                    continue
                assert component in _defined(config, kind), f"{pipeline_id} uses undefined {kind[:-1]} {component}"
                used[kind].add(component)
        processors = pipeline.get("processors") or []
        if "memory_limiter" in processors:
            assert processors[0] == "memory_limiter", f"{pipeline_id}: memory_limiter must come first"
    for connector, roles in connector_roles.items():
        assert roles in ({"receivers", "exporters"}, set()), f"connector {connector} only in {sorted(roles)}"
    for kind in COMPONENT_KINDS:
        unused = _defined(config, kind) - used[kind]
        assert not unused, f"{kind} defined but in no pipeline: {sorted(unused)}"
    assert set(config["service"].get("extensions") or []) == _defined(config, "extensions")


@pytest.mark.parametrize("path", COLLECTOR_CONFIGS, ids=_ids(COLLECTOR_CONFIGS))
def test_otlp_receiver_binds_the_otlp_ports_on_all_interfaces(path: Path) -> None:
    protocols = load_yaml(path)["receivers"]["otlp"]["protocols"]
    # An unset endpoint means localhost in current collectors: other containers could not reach it.
    assert protocols["grpc"]["endpoint"] == f"0.0.0.0:{OTLP_GRPC_PORT}"
    assert protocols["http"]["endpoint"] == f"0.0.0.0:{OTLP_HTTP_PORT}"


@pytest.mark.parametrize("path", COLLECTOR_CONFIGS, ids=_ids(COLLECTOR_CONFIGS))
def test_every_pipeline_receives_otlp(path: Path) -> None:
    for pipeline_id, pipeline in load_yaml(path)["service"]["pipelines"].items():
        assert "otlp" in pipeline["receivers"], pipeline_id


def test_tempo_config_sends_traces_to_tempo_and_metrics_to_prometheus() -> None:
    pipelines = load_yaml(TEMPO_CONFIG)["service"]["pipelines"]
    assert "otlp/tempo" in pipelines["traces"]["exporters"]
    assert "prometheus" in pipelines["metrics"]["exporters"]


def test_jaeger_config_sends_traces_to_jaeger_and_keeps_the_metrics() -> None:
    pipelines = load_yaml(JAEGER_CONFIG)["service"]["pipelines"]
    assert "otlp/jaeger" in pipelines["traces"]["exporters"]
    assert "prometheus" in pipelines["metrics"]["exporters"]


def test_tier1_routes_traces_by_trace_id_to_the_profilers() -> None:
    config = load_yaml(TIER1_CONFIG)
    loadbalancing = config["exporters"]["loadbalancing"]
    assert loadbalancing["routing_key"] == "traceID"
    assert "otlp" in loadbalancing["protocol"]
    assert "endpoint" not in loadbalancing["protocol"]["otlp"], "the resolver supplies the endpoints"
    # Tier 2 is `otel-agent-profiler serve`, listening for OTLP/gRPC on 4317, found by DNS (a compose
    # service scaled to several replicas, or a headless Service: tests/project/test_deploy.py).
    dns = loadbalancing["resolver"]["dns"]
    assert dns["port"] == OTLP_GRPC_PORT
    assert dns["hostname"] in _services(), f"{dns['hostname']} is no compose service"
    assert OTLP_GRPC_PORT in _container_ports(_services()[dns["hostname"]])
    for pipeline_id, pipeline in config["service"]["pipelines"].items():
        exports = {_component_type(exporter) for exporter in pipeline["exporters"]}
        if pipeline_id.startswith("traces"):
            assert exports == {"loadbalancing"}, f"{pipeline_id}: every span must go through trace-id routing"
        else:
            assert "loadbalancing" not in exports, f"{pipeline_id}: traceID routing is for traces only"


# --------------------------------------------------------------------------------------------------------------
# compose.yaml and cross-file consistency


def _services() -> dict[str, dict[str, Any]]:
    return load_yaml(COMPOSE_FILE)["services"]


def _resolve_compose_variables(text: str) -> str:
    """``${VAR:-default}`` / ``${VAR-default}`` -> default (as `docker compose` does with VAR unset)."""
    text = re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-([^}]*)\}", r"\1", text)
    assert "${" not in text, f"compose variable without a default in {text!r}"
    return text


def _published_ports(service: dict[str, Any]) -> dict[int, int]:
    """container port -> host port, from the short syntax ``[ip:]host:container[/proto]``."""
    published = {}
    for entry in service.get("ports") or []:
        parts = str(entry).split("/", 1)[0].split(":")
        assert len(parts) >= 2, f"port {entry!r} is not published on a fixed host port"
        published[int(parts[-1])] = int(parts[-2])
    return published


def _container_ports(service: dict[str, Any]) -> set[int]:
    return set(_published_ports(service)) | {int(str(port).split("/", 1)[0]) for port in service.get("expose") or []}


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """container path -> source (relative sources resolved to paths under collector-config/)."""
    mounts = {}
    for volume in service.get("volumes") or []:
        source, target, *_mode = _resolve_compose_variables(str(volume)).split(":")
        if source.startswith("."):
            source = str((CONFIG_DIR / source).resolve())
        mounts[target] = source
    return mounts


def _service_by_image(prefix: str) -> tuple[str, dict[str, Any]]:
    matches = [(name, svc) for name, svc in _services().items() if str(svc.get("image", "")).startswith(prefix)]
    assert len(matches) == 1, f"expected one service with image {prefix}*, got {[name for name, _ in matches]}"
    return matches[0]


def _command_flag(service: dict[str, Any], flag: str) -> str:
    command = service.get("command") or []
    for argument in command:
        if argument.startswith(f"{flag}="):
            return argument.split("=", 1)[1]
    pytest.fail(f"no {flag}= in command {command}")


def _collector_service() -> tuple[str, dict[str, Any]]:
    """The upstream collector, `otelcol` (tier 1 of the scale-out profile runs the same image)."""
    collector = _services()["otelcol"]
    assert str(collector["image"]).startswith("otel/opentelemetry-collector-contrib:")
    return "otelcol", collector


def _tempo_grpc_port() -> int:
    return _host_port(load_yaml(TEMPO_FILE)["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"])[1]


def test_every_image_is_pinned() -> None:
    for name, service in _services().items():
        image = str(service["image"])
        repository, _, tag = image.rpartition(":")
        assert repository and "/" not in tag, f"{name}: image {image} has no tag"
        assert tag not in {"latest", "main", "nightly"}, f"{name}: image {image} is not pinned"
        assert re.search(r"\d+\.\d+", tag), f"{name}: tag {tag} is not a version"


def test_every_mounted_local_file_exists() -> None:
    for name, service in _services().items():
        for target, source in _mounts(service).items():
            if source.startswith("/"):
                assert Path(source).exists(), f"{name}: {source} (mounted at {target}) does not exist"


def test_compose_collector_publishes_otlp_ports_and_runs_the_tempo_config() -> None:
    _name, collector = _collector_service()
    published = _published_ports(collector)
    assert published.get(OTLP_GRPC_PORT) == OTLP_GRPC_PORT
    assert published.get(OTLP_HTTP_PORT) == OTLP_HTTP_PORT
    config_path = _command_flag(collector, "--config")
    assert Path(_mounts(collector)[config_path]) == TEMPO_CONFIG.resolve()


def test_compose_offers_the_jaeger_config_through_the_config_variable() -> None:
    _name, collector = _collector_service()
    raw = [str(volume) for volume in collector["volumes"] if "OTELCOL_CONFIG" in str(volume)]
    assert raw, "the collector's config file is not selectable with OTELCOL_CONFIG"
    assert JAEGER_CONFIG.name in COMPOSE_FILE.read_text(encoding="utf-8")
    _jaeger_name, jaeger = _service_by_image("jaegertracing/")
    assert jaeger.get("profiles"), "Jaeger should only start with its profile"


def _prometheus_exporter_port(path: Path) -> int | None:
    exporter = (load_yaml(path).get("exporters") or {}).get("prometheus")
    if exporter is None:
        return None
    host, port = _host_port(exporter["endpoint"])
    assert host == "0.0.0.0", f"{path.name}: the prometheus exporter must listen on all interfaces"
    return port


def test_prometheus_scrapes_the_collectors_prometheus_exporter() -> None:
    collector_name, collector = _collector_service()
    targets = {
        target
        for job in load_yaml(PROMETHEUS_FILE)["scrape_configs"]
        for static in job.get("static_configs") or []
        for target in static["targets"]
    }
    scraped_collector_ports = {_host_port(t)[1] for t in targets if _host_port(t)[0] == collector_name}
    for path in (TEMPO_CONFIG, JAEGER_CONFIG):
        port = _prometheus_exporter_port(path)
        assert port is not None, f"{path.name} has no prometheus exporter"
        assert port in scraped_collector_ports, f"Prometheus does not scrape {collector_name}:{port} ({path.name})"
        assert port in _container_ports(collector), f"compose does not expose the exporter port {port}"
    collector_jobs = [
        job
        for job in load_yaml(PROMETHEUS_FILE)["scrape_configs"]
        if any(_host_port(t)[0] == collector_name for s in job.get("static_configs") or [] for t in s["targets"])
    ]
    # Keep the job/instance labels the exporter derives from the application's resource.
    assert all(job.get("honor_labels") is True for job in collector_jobs)


def test_prometheus_service_runs_the_prometheus_config() -> None:
    _name, prometheus = _service_by_image("prom/prometheus:")
    config_path = _command_flag(prometheus, "--config.file")
    assert Path(_mounts(prometheus)[config_path]) == PROMETHEUS_FILE.resolve()
    assert 9090 in _container_ports(prometheus)


def test_tempo_service_runs_the_tempo_config_and_receives_otlp() -> None:
    _name, tempo = _service_by_image("grafana/tempo:")
    config_path = _command_flag(tempo, "-config.file")
    assert Path(_mounts(tempo)[config_path]) == TEMPO_FILE.resolve()
    protocols = load_yaml(TEMPO_FILE)["distributor"]["receivers"]["otlp"]["protocols"]
    for protocol, port in (("grpc", OTLP_GRPC_PORT), ("http", OTLP_HTTP_PORT)):
        host, bound = _host_port(protocols[protocol]["endpoint"])
        assert (host, bound) == ("0.0.0.0", port), f"Tempo {protocol} receiver: {host}:{bound}"
        assert port in _container_ports(tempo)
    http_port = load_yaml(TEMPO_FILE)["server"]["http_listen_port"]
    assert http_port in _container_ports(tempo)


def _otlp_exporter_endpoints(path: Path) -> dict[str, tuple[str, int]]:
    exporters = load_yaml(path).get("exporters") or {}
    return {
        exporter_id: _host_port(settings["endpoint"])
        for exporter_id, settings in exporters.items()
        if _component_type(exporter_id) in {"otlp", "otlphttp"}
    }


@pytest.mark.parametrize("path", COLLECTOR_CONFIGS, ids=_ids(COLLECTOR_CONFIGS))
def test_collector_exporters_point_at_compose_services(path: Path) -> None:
    services = _services()
    for exporter_id, (host, port) in _otlp_exporter_endpoints(path).items():
        assert host in services, f"{path.name}: {exporter_id} sends to {host}, which is no compose service"
        assert port in _container_ports(services[host]), f"{path.name}: {exporter_id}: {host} has no port {port}"


def test_tempo_exporter_matches_the_tempo_service() -> None:
    tempo_name, _tempo = _service_by_image("grafana/tempo:")
    assert _otlp_exporter_endpoints(TEMPO_CONFIG)["otlp/tempo"] == (tempo_name, _tempo_grpc_port())


def test_jaeger_exporter_matches_the_jaeger_service() -> None:
    jaeger_name, _jaeger = _service_by_image("jaegertracing/")
    assert _otlp_exporter_endpoints(JAEGER_CONFIG)["otlp/jaeger"] == (jaeger_name, OTLP_GRPC_PORT)


def test_tier1_sends_metrics_to_the_upstream_collector() -> None:
    collector_name, _collector = _collector_service()
    assert _otlp_exporter_endpoints(TIER1_CONFIG)["otlp/upstream"] == (collector_name, OTLP_GRPC_PORT)


# --------------------------------------------------------------------------------------------------------------
# Grafana provisioning


def _datasources() -> dict[str, dict[str, Any]]:
    return {source["type"]: source for source in load_yaml(DATASOURCES_FILE)["datasources"]}


def test_grafana_datasources_point_at_compose_services() -> None:
    services = _services()
    images = {"prometheus": "prom/prometheus:", "tempo": "grafana/tempo:", "jaeger": "jaegertracing/"}
    datasources = _datasources()
    assert {"prometheus", "tempo"} <= set(datasources)
    for kind, source in datasources.items():
        assert source.get("uid"), f"{kind} data source needs a fixed uid for the dashboard"
        host, port = _host_port(source["url"])
        assert host in services, f"{kind} data source: {host} is no compose service"
        assert str(services[host]["image"]).startswith(images[kind]), f"{kind} data source points at {host}"
        assert port in _container_ports(services[host]), f"{kind} data source: {host} has no port {port}"
    assert _host_port(datasources["tempo"]["url"])[1] == load_yaml(TEMPO_FILE)["server"]["http_listen_port"]


def test_grafana_mounts_the_provisioning_and_the_dashboards() -> None:
    _name, grafana = _service_by_image("grafana/grafana:")
    mounts = _mounts(grafana)
    assert Path(mounts["/etc/grafana/provisioning"]) == (CONFIG_DIR / "grafana/provisioning").resolve()
    (provider,) = load_yaml(DASHBOARD_PROVIDERS_FILE)["providers"]
    assert provider["type"] == "file"
    assert Path(mounts[provider["options"]["path"]]) == DASHBOARD_FILE.parent.resolve()


# --------------------------------------------------------------------------------------------------------------
# Dashboard: PromQL


def _all_panels(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for panel in panels:
        found.append(panel)
        found.extend(_all_panels(panel.get("panels") or []))
    return found


def _targets(kind: str) -> list[tuple[str, dict[str, Any]]]:
    dashboard = load_json(DASHBOARD_FILE)
    return [
        (panel.get("title", ""), target)
        for panel in _all_panels(dashboard["panels"])
        for target in panel.get("targets") or []
        if (target.get("datasource") or panel.get("datasource") or {}).get("type") == kind
    ]


def _promql_expressions() -> list[tuple[str, str]]:
    return [(title, target["expr"]) for title, target in _targets("prometheus")]


def _label_values_queries() -> list[tuple[str, str, str]]:
    found = []
    for variable in load_json(DASHBOARD_FILE)["templating"]["list"]:
        if variable.get("type") != "query":
            continue
        query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
        match = re.fullmatch(r"\s*label_values\(\s*([A-Za-z_:][\w:]*)\s*,\s*(\w+)\s*\)\s*", query)
        assert match, f"variable {variable['name']}: unsupported query {query!r}"
        found.append((variable["name"], match[1], match[2]))
    return found


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GRAFANA_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+")
_SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)?\s*\{([^{}]*)\}")
_MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
_IDENTIFIER = re.compile(r"(?<![\w.:])[A-Za-z_:][A-Za-z0-9_:]*")
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless"}
_KEYWORDS |= {"offset", "inf", "nan", "atan2"}
_FUNCTIONS = {
    "sum", "avg", "min", "max", "count", "topk", "bottomk", "quantile", "stddev", "stdvar", "group",
    "rate", "irate", "increase", "delta", "idelta", "histogram_quantile", "histogram_count", "histogram_sum",
    "histogram_fraction", "clamp_min", "clamp_max", "clamp", "abs", "round", "vector", "scalar", "absent",
    "sum_over_time", "avg_over_time", "max_over_time", "min_over_time", "last_over_time", "label_replace", "sort",
    "sort_desc", "time", "timestamp",
}  # fmt: skip


class PromQL:
    """Metric names and label names of a PromQL expression (enough of the grammar for dashboard queries)."""

    def __init__(self, expr: str) -> None:
        text = _STRING.sub('""', expr)
        text = _GRAFANA_VARIABLE.sub(" 0 ", text)
        self.selector_labels: list[tuple[str | None, set[str]]] = []
        for match in _SELECTOR.finditer(text):
            self.selector_labels.append((match[1], set(_MATCHER.findall(match[2]))))
        text = _SELECTOR.sub(lambda match: f" {match[1] or ''} ", text)
        self.grouping_labels = {label.strip() for match in _GROUPING.finditer(text) for label in match[1].split(",")}
        self.grouping_labels.discard("")
        text = _GROUPING.sub(" ", text)
        text = re.sub(r"\[[^\]]*\]", " ", text)
        self.metrics: set[str] = set()
        self.functions: set[str] = set()
        for match in _IDENTIFIER.finditer(text):
            name = match[0]
            if re.match(r"\s*\(", text[match.end() :]):
                self.functions.add(name)
            elif name not in _KEYWORDS:
                self.metrics.add(name)


def test_promql_parser() -> None:
    query = PromQL(
        'histogram_quantile($quantile, sum by (le, a_b) (rate(x_bucket{a_b=~"$v", c!="{d}"}[$__rate_interval])))'
        " / on(job) group_left sum(y_total) by (instance) * 3600 + 1e3"
    )
    assert query.metrics == {"x_bucket", "y_total"}
    assert query.functions == {"histogram_quantile", "sum", "rate"}
    assert query.grouping_labels == {"le", "a_b", "job", "instance"}
    assert query.selector_labels == [("x_bucket", {"a_b", "c"})]


def test_dashboard_has_promql_panels() -> None:
    assert len(_promql_expressions()) >= 8


def test_dashboard_promql_names_only_translated_profile_metrics() -> None:
    known = series_to_metric()
    for title, expr in _promql_expressions():
        query = PromQL(expr)
        assert query.metrics, f"{title}: no metric in {expr!r}"
        unknown = query.metrics - set(known)
        assert not unknown, f"{title}: {sorted(unknown)} are not Prometheus names of METRICS ({sorted(known)})"
        assert query.functions <= _FUNCTIONS, f"{title}: unknown functions {sorted(query.functions - _FUNCTIONS)}"
    for variable, series, _label in _label_values_queries():
        assert series in known, f"variable {variable}: {series} is not a Prometheus name of METRICS"


def test_dashboard_promql_labels_are_translated_attribute_keys() -> None:
    known = series_to_metric()
    for title, expr in _promql_expressions():
        query = PromQL(expr)
        for series, labels in query.selector_labels:
            assert series in known, f"{title}: selector without a metric name in {expr!r}"
            bad = labels - allowed_labels(known[series])
            assert not bad, f"{title}: {series} has no labels {sorted(bad)}"
        # A by/on/without clause applies to one part of a query; the parser does not see which, so
        # each grouped label must belong to one of the query's metrics (to all, with just one).
        labels_of_any = set().union(*(allowed_labels(known[series]) for series in query.metrics))
        bad = query.grouping_labels - labels_of_any
        assert not bad, f"{title}: none of {sorted(query.metrics)} has the labels {sorted(bad)} (by/on/without)"
    for variable, series, label in _label_values_queries():
        assert label in allowed_labels(known[series]), f"variable {variable}: {series} has no label {label}"


def test_dashboard_covers_every_profile_metric() -> None:
    known = series_to_metric()
    used = {known[series] for _title, expr in _promql_expressions() for series in PromQL(expr).metrics}
    assert used == set(METRICS), f"no panel for {sorted(set(METRICS) - used)}"


def test_dashboard_datasources_default_to_the_provisioned_ones() -> None:
    dashboard = load_json(DASHBOARD_FILE)
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
    datasources = _datasources()
    for kind in ("prometheus", "tempo"):
        uses = {
            (target.get("datasource") or {}).get("uid")
            for _title, target in _targets(kind)
            if (target.get("datasource") or {}).get("uid")
        }
        (uid,) = uses
        reference = re.fullmatch(r"\$\{(\w+)\}", uid)
        assert reference, f"{kind} panels use data source {uid!r}, not a dashboard variable"
        variable = variables[reference[1]]
        assert variable["type"] == "datasource" and variable["query"] == kind
        assert variable["current"]["value"] == datasources[kind]["uid"]


# --------------------------------------------------------------------------------------------------------------
# Dashboard and README: TraceQL

_TRACEQL_ATTRIBUTE = re.compile(r"(?<![\w.])(\w*)\.(agent_profiler(?:\.\w+)+)")


def _traceql_queries() -> list[tuple[str, str]]:
    queries = [(title, target["query"]) for title, target in _targets("tempo")]
    for link in load_json(DASHBOARD_FILE).get("links") or []:
        url = urllib.parse.urlsplit(link["url"])
        if url.path.endswith("/explore"):
            panes = json.loads(urllib.parse.parse_qs(url.query)["panes"][0])
            queries += [(link["title"], query["query"]) for pane in panes.values() for query in pane["queries"]]
    return queries


def _check_traceql_attributes(where: str, query: str) -> int:
    known = set(SPAN_ATTRIBUTES) | set(ROOT_ATTRIBUTES)
    found = 0
    for scope, attribute in _TRACEQL_ATTRIBUTE.findall(query):
        assert scope in {"", "span"}, f"{where}: {scope}.{attribute}: the profiler's attributes are span attributes"
        assert attribute in known, f"{where}: {attribute} is not in SPAN_ATTRIBUTES or ROOT_ATTRIBUTES"
        found += 1
    return found


def test_dashboard_traceql_names_existing_span_attributes() -> None:
    queries = _traceql_queries()
    assert len(queries) >= 4
    assert sum(_check_traceql_attributes(where, query) for where, query in queries) >= len(queries)


def test_readme_traceql_names_existing_span_attributes() -> None:
    assert _check_traceql_attributes("README.md", README_FILE.read_text(encoding="utf-8")) >= 3


def test_dashboard_links_to_slow_critical_path_tools_in_tempo() -> None:
    links = {link["title"].lower(): link for link in load_json(DASHBOARD_FILE)["links"]}
    link = links["critical-path tool spans slower than 1 s"]
    panes = json.loads(urllib.parse.parse_qs(urllib.parse.urlsplit(link["url"]).query)["panes"][0])
    (query,) = [query for pane in panes.values() for query in pane["queries"]]
    assert query["datasource"]["uid"] == _datasources()["tempo"]["uid"]
    normalized = " ".join(query["query"].split())
    assert 'span.agent_profiler.category = "tool"' in normalized
    assert "span.agent_profiler.on_critical_path = true" in normalized
    assert "duration > 1s" in normalized


def test_traceql_metrics_panels_have_the_local_blocks_processor() -> None:
    metrics_queries = [title for title, target in _targets("tempo") if target.get("metricsQueryType")]
    if metrics_queries:
        processors = load_yaml(TEMPO_FILE)["overrides"]["defaults"]["metrics_generator"]["processors"]
        assert "local-blocks" in processors, f"{metrics_queries} need Tempo's local-blocks processor"


def test_readme_names_every_file() -> None:
    readme = README_FILE.read_text(encoding="utf-8")
    for path in [*COLLECTOR_CONFIGS, COMPOSE_FILE, TEMPO_FILE, PROMETHEUS_FILE, DASHBOARD_FILE]:
        assert path.name in readme, f"README.md does not mention {path.name}"


# --------------------------------------------------------------------------------------------------------------
# Real parsers (promtool comes with the Prometheus package that scripts/test installs)


def _promtool() -> str:
    found = shutil.which("promtool")
    if not found:
        pytest.fail("`promtool` is not on PATH; scripts/test installs it (Debian package prometheus)", pytrace=False)
    return found


@pytest.mark.e2e
def test_promtool_accepts_the_prometheus_config() -> None:
    result = subprocess.run(
        [_promtool(), "check", "config", "--syntax-only", str(PROMETHEUS_FILE)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.e2e
def test_promtool_parses_every_dashboard_query(tmp_path: Path) -> None:
    substitutions = {"$__rate_interval": "5m", "$__range": "1h", "$__interval": "1m", "$quantile": "0.95"}
    rules = []
    for number, (_title, expr) in enumerate(_promql_expressions()):
        for variable, value in substitutions.items():
            expr = expr.replace(variable, value)
        expr = _GRAFANA_VARIABLE.sub(".*", expr)  # what is left are regex matcher values ($category, ...)
        rules.append({"record": f"dashboard:query_{number}", "expr": expr})
    rules_file = tmp_path / "dashboard-rules.yml"
    rules_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}), encoding="utf-8")
    result = subprocess.run([_promtool(), "check", "rules", str(rules_file)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
