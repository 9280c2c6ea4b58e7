# koordpy's scheduler image: `koordpy run` with in-cluster credentials.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY koordpy ./koordpy
RUN pip install --no-cache-dir . && useradd --uid 65532 --no-create-home koordpy
# numba caches compiled kernels beside the package; a writable cache dir avoids recompiling as non-root.
ENV NUMBA_CACHE_DIR=/tmp/numba
USER 65532
ENTRYPOINT ["koordpy", "run"]
