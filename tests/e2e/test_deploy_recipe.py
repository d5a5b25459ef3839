"""The deploy recipe (docs/scaling.md): docker-compose.yml, the Dockerfile and the Procfile fit
the configuration they run with. Docker is not needed: the files are read, not run."""

from __future__ import annotations

import re
from typing import Any

import yaml

from bot.config import load_config
from tests.paths import ROOT

_COMPOSE_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")


def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def service_env(service: dict[str, Any]) -> dict[str, str]:
    """The service's environment as Compose passes it when nothing is set on the host."""
    env = service["environment"]
    assert isinstance(env, dict)
    return {str(k): _COMPOSE_VAR.sub(lambda m: m.group(2) or "", str(v)) for k, v in env.items()}


def test_compose_runs_a_cluster_on_postgres_and_redis() -> None:
    services = compose()["services"]
    assert {"postgres", "redis", "loopgate", "lb"} <= set(services)
    loopgate = services["loopgate"]
    assert loopgate["build"] == "."
    assert loopgate["deploy"]["replicas"] >= 2
    assert set(loopgate["depends_on"]) == {"postgres", "redis"}
    # No fixed host port on the scaled service: `--scale loopgate=3` would collide.
    assert "ports" not in loopgate

    config = load_config(ROOT / "config.yaml", service_env(loopgate))
    assert config.database.url.startswith("postgresql+asyncpg://loopgate:")
    assert config.database.url.endswith("@postgres:5432/loopgate")
    assert config.redis.url == "redis://redis:6379/0"
    assert config.server.port == 8080


def test_every_variable_of_config_yaml_is_wired_in_compose() -> None:
    def strings(node: Any) -> list[str]:
        if isinstance(node, dict):
            return [s for value in node.values() for s in strings(value)]
        if isinstance(node, list):
            return [s for value in node for s in strings(value)]
        return [node] if isinstance(node, str) else []

    values = strings(yaml.safe_load((ROOT / "config.yaml").read_text()))
    names = {m.group(1) for value in values for m in _COMPOSE_VAR.finditer(value)}
    given = set(service_env(compose()["services"]["loopgate"]))
    # LOOPGATE_HOST: the image's command passes --host 0.0.0.0 instead.
    assert names - given == {"LOOPGATE_HOST"}


def test_the_load_balancer_targets_the_scaled_service() -> None:
    data = compose()
    caddyfile = data["configs"]["caddyfile"]["content"]
    assert "name loopgate" in caddyfile and "port 8080" in caddyfile
    assert data["services"]["lb"]["configs"][0]["source"] == "caddyfile"


def test_dockerfile_and_procfile_start_the_server() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert dockerfile.startswith("#") and "FROM python:3.11-slim" in dockerfile
    assert 'CMD ["loopgate", "serve", "--host", "0.0.0.0"]' in dockerfile
    procfile = (ROOT / "Procfile").read_text()
    assert procfile.strip() == "web: loopgate serve --host 0.0.0.0 --port $PORT"


def test_repository_config_without_redis_url_is_one_process() -> None:
    assert load_config(ROOT / "config.yaml", {}).redis.url == ""
