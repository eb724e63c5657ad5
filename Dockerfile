# otel-agent-profiler serve: the profiling tier as a container image.
#
#   docker build -t otel-agent-profiler:0.1.0 .
#   docker run --rm -p 4317:4317 -p 4318:4318 -e OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4317 \
#       otel-agent-profiler:0.1.0
#
# Arguments after the image name replace the default `--host 0.0.0.0` and go to `serve`: keep `--host 0.0.0.0`
# (serve listens on 127.0.0.1 by default, which nothing outside the container reaches). Ports: OTLP/gRPC 4317,
# OTLP/HTTP 4318 (also GET /health, /health/live, /health/ready). Deployment: collector-config/kubernetes/
# and the `scale-out` profile of collector-config/compose.yaml (docs/deployment.md, "Deploy serve").

# Build stage: the package and its runtime dependencies (pinned by constraints.txt) into a virtual
# environment without pip, so that only what `serve` runs is copied into the final image.
FROM python:3.11.14-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY otel_agent_profiler ./otel_agent_profiler
RUN python -m venv --without-pip /opt/otel-agent-profiler \
    && pip --python /opt/otel-agent-profiler/bin/python install --constraint constraints.txt .

# Runtime stage: the same base image (the virtual environment points at its /usr/local/bin/python3.11),
# the environment, and an unprivileged user. No compilers, no pip, no sources.
FROM python:3.11.14-slim-bookworm AS runtime
RUN groupadd --system --gid 10001 profiler \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin profiler
COPY --from=build /opt/otel-agent-profiler /opt/otel-agent-profiler
ENV PATH=/opt/otel-agent-profiler/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
EXPOSE 4317 4318
ENTRYPOINT ["otel-agent-profiler", "serve"]
CMD ["--host", "0.0.0.0"]
