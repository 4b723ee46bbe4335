"""The README's road to a cluster, checked snippet by snippet.

A newcomer copies these as written: every Service name and port must be one deploy/
really creates (`kubectl kustomize`), every YAML snippet must parse and, for a
KubeSchedulerConfiguration, pass `extender check --scheduler-config`, every `extender`
command and option must exist in the CLI, every `make` target in the Makefile, and every
Helm value in the chart's values.yaml (when the chart is in this checkout).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from extender.cli import COMMANDS, main
from tests.deploy import DEPLOY, find, kubectl, render
from tests.helpers import ROOT

README = ROOT / "README.md"
CHART = ROOT / "deploy" / "helm" / "scheduler-extender"
TEXT = README.read_text()


def _blocks(language: str, text: str = TEXT) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def _section(title: str) -> str:
    start = TEXT.index(f"## {title}")
    end = TEXT.find("\n## ", start + 1)
    return TEXT[start:end if end != -1 else None]


def _documents() -> list[dict[str, Any]]:
    docs = []
    for block in _blocks("yaml"):
        docs += [doc for doc in yaml.safe_load_all(block) if doc is not None]
    return docs


def _commands() -> list[list[str]]:
    """Each shell line of the sh blocks, continuations joined, comments and `&` dropped."""
    lines = []
    for block in _blocks("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip().rstrip("&").strip()
            if line and not line.startswith("#"):
                for part in line.split(";"):
                    if part.strip():
                        lines.append(shlex.split(part))
    return lines


# ---- the fresh-machine commands ------------------------------------------------------------


def test_quick_start_has_exactly_one_command_each_for_run_and_test() -> None:
    assert [b.strip() for b in _blocks("sh", _section("Quick start"))] == ["make run", "make test"]


def test_make_run_installs_the_runtime_dependencies_only() -> None:
    makefile = (ROOT / "Makefile").read_text()
    stamp = re.search(r"^run: (\S+)", makefile, flags=re.M)[1]
    recipe = makefile[makefile.index(f"{stamp}:"):].split("\n\n", 1)[0]
    assert "pip install -q -e .\n" in recipe + "\n" and "[test" not in recipe, recipe
    assert re.search(r"^test: install$", makefile, flags=re.M) and "install: $(VENV)/.installed\n" in makefile
    extras = makefile[makefile.index("$(VENV)/.installed: "):].split("\n\n", 1)[0]
    assert "pip install -q -e '.[test,bench]'" in extras, extras


def test_ci_runs_the_readmes_test_command() -> None:
    script = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert script[-1].startswith("make test"), script[-1]


# ---- deploy/: names and ports ----------------------------------------------------------------


def test_every_service_url_names_a_service_deploy_creates() -> None:
    docs = render("")
    urls = set(re.findall(r"https?://([a-z0-9-]+)\.([a-z0-9-]+)\.svc(?:\.cluster\.local)?:(\d+)", TEXT))
    assert urls, "the README names the webhook's Service"
    for name, namespace, port in urls:
        services = [s for s in find(docs, "Service", name) if s["metadata"]["name"] == name]
        assert services, f"{name}.{namespace}.svc: deploy/ creates no Service {name}"
        service = services[0]
        assert service["metadata"]["namespace"] == namespace
        assert int(port) in [p["port"] for p in service["spec"]["ports"]]


def test_the_table_of_objects_matches_deploy() -> None:
    docs = render("")
    rows = re.findall(r"^\| (Service|Deployment|ConfigMap)[^|]*\| `([a-z0-9-]+)` \| ([^|]*)\|", TEXT, flags=re.M)
    assert {kind for kind, _, _ in rows} == {"Service", "Deployment", "ConfigMap"}
    for kind, name, ports in rows:
        (obj,) = find(docs, kind, name)
        assert obj["metadata"]["namespace"] == "scheduler-extender"
        numbers = [int(n) for n in re.findall(r"\b(\d{4,5})\b", ports)]
        if kind == "Service":
            assert numbers == [p["port"] for p in obj["spec"]["ports"]]
        elif kind == "Deployment" and numbers:
            container_ports = [p["containerPort"] for c in obj["spec"]["template"]["spec"]["containers"]
                               for p in c.get("ports", [])]
            assert set(numbers) <= set(container_ports), (name, container_ports)


def test_kubectl_lines_name_objects_deploy_creates() -> None:
    docs = render("")
    kinds = {"deploy": "Deployment", "deployment": "Deployment", "service": "Service", "svc": "Service"}
    pattern = r"\b(deploy|deployment|service|svc)[/ ](extender-[a-z0-9-]+)"
    named = re.findall(pattern, " ".join(" ".join(c) for c in _commands()))
    named += re.findall(pattern, TEXT)
    assert named
    for word, name in named:
        assert [d for d in find(docs, kinds[word], name) if d["metadata"]["name"] == name], (word, name)


def test_example_pods_use_a_scheduler_deploy_runs() -> None:
    docs = render("")
    names = set()
    for config in find(docs, "ConfigMap"):
        for text in config.get("data", {}).values():
            if "KubeSchedulerConfiguration" in text:
                names |= {p["schedulerName"] for p in yaml.safe_load(text)["profiles"]}
    for deployment in find(docs, "Deployment", "extender-scheduler"):
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        names.add(args[args.index("--scheduler-name") + 1])
    pods = [doc for doc in _documents() if doc.get("kind") == "Pod"]
    assert pods
    for pod in pods:
        assert pod["spec"]["schedulerName"] in names, (pod["spec"]["schedulerName"], names)
    for name in re.findall(r"`(extender-(?:kube-)?scheduler)`", _section("From the repository")):
        assert name in names or find(docs, "Deployment", name), name


def test_the_kustomization_snippet_sets_the_image(tmp_path: Path) -> None:
    (snippet,) = [doc for doc in _documents() if doc.get("kind") == "Kustomization"]
    (tmp_path / "deploy").symlink_to(DEPLOY, target_is_directory=True)
    mine = tmp_path / "my-cluster"
    mine.mkdir()
    (mine / "kustomization.yaml").write_text(yaml.safe_dump(snippet))
    result = subprocess.run([kubectl(), "kustomize", str(mine)], capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    wanted = f"{snippet['images'][0]['newName']}:{snippet['images'][0]['newTag']}"
    images = {c["image"] for doc in yaml.safe_load_all(result.stdout) if doc and doc["kind"] == "Deployment"
              for c in doc["spec"]["template"]["spec"]["containers"] if "kube-scheduler" not in c["image"]}
    assert images == {wanted}


# ---- YAML snippets ---------------------------------------------------------------------------


def test_every_yaml_snippet_parses_to_objects() -> None:
    assert len(_blocks("yaml")) >= 6
    for doc in _documents():
        assert isinstance(doc, dict)


def test_scheduler_configurations_pass_extender_check(tmp_path: Path) -> None:
    configs = [doc for doc in _documents() if doc.get("kind") == "KubeSchedulerConfiguration"]
    assert configs
    for i, config in enumerate(configs):
        path = tmp_path / f"config-{i}.yaml"
        path.write_text(yaml.safe_dump(config))
        result = CliRunner().invoke(main, ["check", "--scheduler-config", str(path)])
        assert result.exit_code == 0, result.output


def test_the_static_pod_snippet_mounts_the_file_it_passes_to_config() -> None:
    (manifest,) = [doc for doc in _documents() if "kind" not in doc and "spec" in doc]
    container = manifest["spec"]["containers"][0]
    (flag,) = [arg for arg in container["command"] if arg.startswith("--config=")]
    path = flag.removeprefix("--config=")
    (mount,) = container["volumeMounts"]
    (volume,) = manifest["spec"]["volumes"]
    assert mount["mountPath"] == path == volume["hostPath"]["path"] and mount["name"] == volume["name"]
    assert f"/etc/kubernetes/{Path(path).name}" == path and Path(path).name in TEXT.replace(path, "")


def test_policy_snippets_load() -> None:
    from extender.policy.loading import load_policy

    policies = [block for block in _blocks("yaml") if "kind: Policy" in block]
    assert policies
    for block in policies:
        load_policy(block, source="README")


# ---- commands --------------------------------------------------------------------------------


def test_extender_commands_and_options_exist() -> None:
    import click

    lines = [c for c in _commands() if c[0] == "extender"]
    lines += [shlex.split(m) for m in re.findall(r"`(extender [a-z]+[^`]*)`", TEXT)]
    assert len(lines) >= 8
    for words in lines:
        name = words[1]
        assert name in COMMANDS, words
        command = main.get_command(click.Context(main), name)
        options = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
        for word in words[2:]:
            if word.startswith("--") and word != "--help":
                assert word.split("=")[0] in options, (word, words)


def test_make_targets_exist() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = {c[1] for c in _commands() if c[0] == "make"} | set(re.findall(r"`make ([a-z0-9-]+)", TEXT))
    assert {"run", "test", "image"} <= targets
    for target in targets:
        assert re.search(rf"^{target}:", makefile, flags=re.M), target


def test_kustomize_paths_exist() -> None:
    paths = {c[-1] for c in _commands() if c[:2] == ["kubectl", "apply"] and "-k" in c}
    paths |= set(re.findall(r"`kubectl apply -k ([^`]+)`", TEXT))
    paths |= set(re.findall(r"`(deploy/overlays/[a-z]+)`", TEXT))
    assert "deploy/overlays/webhook" in paths
    for path in paths:
        if path.startswith("deploy"):
            assert (ROOT / path / "kustomization.yaml").is_file(), path


def _chart_values() -> dict[str, Any]:
    assert (CHART / "values.yaml").is_file(), "the README installs deploy/helm/scheduler-extender"
    return dict(yaml.safe_load((CHART / "values.yaml").read_text()))


def test_helm_install_line_and_values_exist_in_the_chart() -> None:
    installs = [c for c in _commands() if c[:2] == ["helm", "install"]]
    assert installs  # the install step, and the local node's (the same release, chart and namespace)
    for words in installs:
        assert words[2:4] == ["scheduler-extender", "deploy/helm/scheduler-extender"]
        assert words[words.index("-n") + 1] == "scheduler-extender" and "--create-namespace" in words
    keys = set(re.findall(r"--set ([a-zA-Z.]+)=", TEXT))
    keys |= set(re.findall(r"`((?:webhook|kubeScheduler|standalone|image)\.[a-zA-Z.]+)`", TEXT))
    assert {"image.repository", "image.tag", "webhook.enabled", "kubeScheduler.enabled",
            "standalone.enabled"} <= keys
    values = _chart_values()
    for key in keys:
        node: Any = values
        for part in key.split("."):
            assert isinstance(node, dict) and part in node, f"{key}: not a value of the chart"
            node = node[part]


# ---- performance ---------------------------------------------------------------------------


def test_the_benchmark_tables_live_in_docs_performance() -> None:
    performance = (ROOT / "docs" / "performance.md").read_text()
    assert "[docs/performance.md](docs/performance.md)" in _section("Performance")
    assert "| setup | pods/s |" in performance and "| what | result | target |" in performance
    assert "| setup | pods/s |" not in TEXT and "| what | result | target |" not in TEXT
    assert len(_section("Performance").splitlines()) < 15
