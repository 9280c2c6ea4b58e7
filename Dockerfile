# koordpy's scheduler image: `koordpy run` with in-cluster credentials.
#
#   docker build -t koordpy:dev .
#
# The builder stage installs koordpy and its dependencies into a virtualenv; the final stage
# copies the virtualenv alone (no compilers, no pip cache) and compiles the numba kernels once,
# at build time, into a seed cache. numba only uses a writable cache directory and the chart
# runs the container with a read-only root filesystem, so `koordpy` copies the seed into
# $NUMBA_CACHE_DIR (an emptyDir in the chart) at start: the first cycle does not wait ~20 s
# for a compiler. A node whose CPU differs from the build machine's recompiles once.

FROM python:3.11-slim AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml README.md ./
COPY koordpy ./koordpy
RUN /opt/venv/bin/pip install .

FROM python:3.11-slim
LABEL org.opencontainers.image.title="koordpy" \
      org.opencontainers.image.description="Gang- and network-topology-aware Kubernetes scheduler for AI training clusters" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN useradd --uid 65532 --user-group --no-create-home --shell /usr/sbin/nologin koordpy
COPY --from=builder /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    KOORDPY_NUMBA_SEED=/opt/koordpy/numba-cache \
    NUMBA_CACHE_DIR=/tmp/numba
RUN NUMBA_CACHE_DIR=/opt/koordpy/numba-cache python -c "from koordpy.kernels.warm import warm_up; warm_up()" \
    && chmod -R a+rX /opt/koordpy
USER 65532:65532
EXPOSE 10251
ENTRYPOINT ["koordpy", "run"]
