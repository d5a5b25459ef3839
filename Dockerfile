# Loopgate in a container: `docker build -t loopgate .`, or `docker compose up` (docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app

COPY pyproject.toml README.md ./
COPY agent_core ./agent_core
COPY bot ./bot
COPY channels ./channels
RUN pip install . \
    && rm -rf agent_core bot channels \
    && useradd --create-home --uid 10001 loopgate \
    && mkdir -p data/workspaces \
    && chown -R loopgate data
COPY config.yaml ./

USER loopgate
EXPOSE 8080
# PORT (default 8080 from config.yaml) and every secret come from the environment.
CMD ["loopgate", "serve", "--host", "0.0.0.0"]
