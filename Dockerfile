# syntax=docker/dockerfile:1
# The relay image: `relay serve`, configured by RELAY_* variables (docs/settings.md), or
# Unleash Edge's command line (`edge`, as Edge's Helm chart gives it: docs/edge.md).
#   docker build -t relay:0.1.0 .
#   docker run -p 4242:4242 -v relay-data:/data relay:0.1.0
# tests/e2e/test_deploy_dockerfile.py lints this file with hadolint;
# tests/e2e/test_deploy_image.py runs its pip steps in a virtualenv.

# Stage 1: wheels of the project and every dependency, built where a compiler may be needed.
FROM python:3.11.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY relay ./relay
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# Stage 2: the runtime, installed from those wheels only, running as a non-root user.
FROM python:3.11.11-slim-bookworm
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    RELAY_DATA_DIR=/data \
    TMPDIR=/data
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels /wheels/relay-*.whl \
    && groupadd --system --gid 10001 relay \
    && useradd --system --uid 10001 --gid 10001 --home-dir /data --no-create-home \
       --shell /usr/sbin/nologin relay \
    && mkdir /data \
    && chown 10001:10001 /data
# The only writable path: SQLite store (standalone) or buffer (relay), and SQLite's temp files.
VOLUME ["/data"]
WORKDIR /data
USER 10001:10001
# 4242 standalone, 3063 relay, 3000 relay proxy (the Unleash Proxy's); RELAY_PORT overrides.
EXPOSE 4242 3063 3000
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
    CMD ["relay", "healthcheck"]
STOPSIGNAL SIGTERM
# The program is the entrypoint, the command its arguments, as in Edge's image, so that Edge's
# chart (`args: ["edge"]`) runs `relay edge` and `docker run relay:0.1.0 keys create` works.
# Options alone are `serve`'s: `docker run relay:0.1.0 --mode relay ...` is `relay serve ...`.
ENTRYPOINT ["relay"]
CMD ["serve"]
