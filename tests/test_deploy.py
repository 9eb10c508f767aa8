"""deploy/kubernetes and the Dockerfile, checked offline.

The built-in kinds are validated with ``kubernetes-validate`` (the API's own JSON schemas, strict:
unknown fields fail) for the oldest and newest Kubernetes it ships; the PodMonitor, a custom
resource it has no schema for, against tests/data/kubernetes/podmonitor-v1.schema.json, a subset of
the Prometheus Operator CRD's schema (its header names the source). The DaemonSet's command line is
parsed by acceptmon's own argument parser. Images cannot be built here (no container engine), so the
Dockerfile is checked against the DaemonSet and pyproject.toml instead.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from kubernetes_validate import utils as kv

from acceptmon.cli import _build_parser

ROOT = Path(__file__).resolve().parent.parent
K8S = ROOT / "deploy" / "kubernetes"
DATA = Path(__file__).resolve().parent / "data" / "kubernetes"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
KUBERNETES_VERSIONS = (kv.all_versions()[0], kv.latest_version())


def resources() -> list[tuple[str, dict[str, Any]]]:
    """(file name, resource) for every resource the kustomization lists."""
    out = []
    for name in yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]:
        out += [(name, r) for r in yaml.safe_load_all((K8S / name).read_text()) if r]
    return out


def one(kind: str) -> dict[str, Any]:
    found = [r for _, r in resources() if r["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind} resources"
    return found[0]


def pod_spec() -> dict[str, Any]:
    return one("DaemonSet")["spec"]["template"]["spec"]


def container() -> dict[str, Any]:
    (c,) = pod_spec()["containers"]
    return c


def serve_args() -> Any:
    c = container()
    assert c["command"] == ["acceptmon"]
    return _build_parser("live").parse_args(c["args"])


def test_kustomization_lists_every_manifest_once():
    k = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert k["apiVersion"] == "kustomize.config.k8s.io/v1beta1" and k["kind"] == "Kustomization"
    listed = k["resources"]
    assert len(listed) == len(set(listed))
    on_disk = sorted(p.name for p in K8S.iterdir() if p.suffix in (".yaml", ".yml") and p.name != "kustomization.yaml")
    assert sorted(listed) == on_disk
    assert set(k) <= {"apiVersion", "kind", "namespace", "resources", "labels", "images"}
    ns = one("Namespace")["metadata"]["name"]
    assert k["namespace"] == ns
    assert {r["kind"] for _, r in resources()} == {"Namespace", "DaemonSet", "Service", "PodMonitor"}


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_builtin_kinds_validate_strictly(version):
    checked = []
    for name, r in resources():
        if r["kind"] == "PodMonitor":
            continue
        kv.validate(r, version, strict=True)  # raises kubernetes_validate's ValidationError
        checked.append(f"{name}:{r['kind']}")
    assert sorted(checked) == ["daemonset.yaml:DaemonSet", "namespace.yaml:Namespace", "service.yaml:Service"]


def test_strict_validation_refuses_a_misspelt_field():
    """The validator is not a rubber stamp: a typo in the security context is an error."""
    ds = copy.deepcopy(one("DaemonSet"))
    ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] = True
    with pytest.raises(kv.ValidationError):
        kv.validate(ds, KUBERNETES_VERSIONS[-1], strict=True)
    # and a Service port must be a number
    svc = copy.deepcopy(one("Service"))
    svc["spec"]["ports"][0]["port"] = "9464"
    with pytest.raises(kv.ValidationError):
        kv.validate(svc, KUBERNETES_VERSIONS[-1], strict=True)


def test_podmonitor_matches_the_crd_schema():
    schema = json.loads((DATA / "podmonitor-v1.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    pm = one("PodMonitor")
    jsonschema.validate(pm, schema)
    bad = copy.deepcopy(pm)
    bad["spec"]["podMetricsEndpoints"][0]["honourLabels"] = True
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    bad = copy.deepcopy(pm)
    bad["spec"]["podMetricsEndpoints"][0]["interval"] = "30 seconds"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_podmonitor_and_service_find_the_exporter_pods():
    ds = one("DaemonSet")
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    pm = one("PodMonitor")["spec"]
    assert pm["selector"]["matchLabels"].items() <= pod_labels.items()
    svc = one("Service")["spec"]
    assert svc["selector"].items() <= pod_labels.items()
    (port,) = container()["ports"]
    (endpoint,) = pm["podMetricsEndpoints"]
    assert endpoint["port"] == port["name"] == svc["ports"][0]["targetPort"]
    assert port["containerPort"] == svc["ports"][0]["port"] == serve_args().port
    # The series carry the inference pod's namespace, pod and container: the exporter pod's own must not win.
    assert endpoint["honorLabels"] is True
    assert endpoint["path"] == "/metrics"


def test_daemonset_args_are_ones_serve_accepts():
    args = serve_args()
    assert args.command == "serve" and args.func.__name__ == "cmd_serve"
    assert args.files == ["/var/log/pods/*/*/*.log"]
    assert args.poll is True and args.poll_interval == 1.0
    assert args.host == "0.0.0.0"
    mounts = {m["mountPath"]: m for m in container()["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec()["volumes"]}
    state_dir = str(args.state_file.parent)
    assert not mounts[state_dir].get("readOnly", False)
    assert volumes[mounts[state_dir]["name"]]["hostPath"]["path"] == state_dir
    # the parser really is strict: an option serve lacks exits 2
    with pytest.raises(SystemExit) as exit_info:
        _build_parser("live").parse_args([*container()["args"], "--pol"])
    assert exit_info.value.code == 2


def test_pod_logs_are_a_read_only_host_path():
    mounts = {m["mountPath"]: m for m in container()["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec()["volumes"]}
    logs = mounts["/var/log/pods"]
    assert logs["readOnly"] is True
    assert volumes[logs["name"]]["hostPath"] == {"path": "/var/log/pods", "type": "Directory"}
    for path in serve_args().files:
        assert path.startswith("/var/log/pods/")
    # every volume but the state directory and an in-memory /tmp is mounted read-only
    writable = {p for p, m in mounts.items() if not m.get("readOnly", False)}
    assert writable == {str(serve_args().state_file.parent), "/tmp"}
    assert volumes[mounts["/tmp"]["name"]]["emptyDir"]["medium"] == "Memory"


def test_the_pod_runs_locked_down():
    spec = pod_spec()
    assert spec["automountServiceAccountToken"] is False
    pod_sc = spec["securityContext"]
    assert pod_sc["runAsNonRoot"] is True and pod_sc["runAsUser"] > 0
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    c = container()
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False and sc["privileged"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert "runAsUser" not in sc and "runAsGroup" not in sc  # the pod's user holds for the container
    for kind in ("requests", "limits"):
        assert set(c["resources"][kind]) == {"cpu", "memory"}
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["port"] == c["ports"][0]["name"]


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, rest) per instruction, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_user_is_the_daemonsets_user():
    users = [rest for word, rest in dockerfile() if word == "USER"]
    assert users, "the image must not run as root"
    uid, _, gid = users[-1].partition(":")
    pod_sc = pod_spec()["securityContext"]
    assert int(uid) == pod_sc["runAsUser"] and int(gid) == pod_sc["runAsGroup"]  # numeric: runAsNonRoot can check it


def test_dockerfile_installs_this_package_and_runs_acceptmon():
    steps = dockerfile()
    (base,) = [rest for word, rest in steps if word == "FROM"]
    assert re.fullmatch(r"python:3\.\d+-slim", base)
    required = PYPROJECT["project"]["requires-python"].removeprefix(">=")
    assert tuple(int(x) for x in base.split(":")[1].removesuffix("-slim").split(".")) >= tuple(
        int(x) for x in required.split(".")
    )
    copied = set()
    for word, rest in steps:
        if word == "COPY":
            *sources, _dest = shlex.split(rest)
            copied |= {s.removeprefix("./") for s in sources}
    wheel = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]
    needed = {
        "pyproject.toml",
        "hatch_build.py",
        PYPROJECT["project"]["readme"],
        *wheel["packages"],
        *wheel["force-include"],
    }
    assert needed <= copied, f"the build context the Dockerfile copies lacks {sorted(needed - copied)}"
    assert any(word == "RUN" and "pip install ." in rest for word, rest in steps)
    (entry,) = [json.loads(rest) for word, rest in steps if word == "ENTRYPOINT"]
    assert entry == container()["command"] == ["acceptmon"] and "acceptmon" in PYPROJECT["project"]["scripts"]
    exposed = [rest for word, rest in steps if word == "EXPOSE"]
    assert exposed == [str(container()["ports"][0]["containerPort"])]


def test_daemonset_image_is_this_version():
    name, _, tag = container()["image"].rpartition(":")
    assert name == "acceptmon" and tag == PYPROJECT["project"]["version"]
    assert f"docker build -t {container()['image']} ." in (ROOT / "Dockerfile").read_text()
