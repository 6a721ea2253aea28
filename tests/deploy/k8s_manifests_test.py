"""The Kubernetes manifests of deploy/k8s/ against the binaries and the install layout.

Renders every kustomization (overlays/sqlite, overlays/etcd, job-pool) with `kubectl kustomize`
and checks, in every pod template:
  - each container's command is a binary of deploy/install.sh's layout (PREFIX/bin/...), and every
    argument naming a path under PREFIX names a file of that layout;
  - every --flag given to ringleader-coordinator or ringleader-worker is one that binary's
    --helpfull lists (a renamed flag fails here, not in a crash-looping pod);
  - every $(VAR) an argument or an env value names is defined (an env value only by a variable
    listed before it: Kubernetes expands nothing else);
  - every probe names a port the container exposes (grpc: by number, as Kubernetes requires);
    no grpc: probe targets a mutual-TLS port (the kubelet's probe has no client certificate);
    the ports the binary listens on (--listen, --http_listen, --admin_listen) are exposed and
    bound to every interface, so the kubelet and the Services reach them;
  - the securityContext: runAsNonRoot, readOnlyRootFilesystem, no privilege escalation, every
    capability dropped; --tls_dir is a mounted Secret;
  - the overlays' shape: sqlite = 1 coordinator with --state_dir on a volumeClaimTemplate; etcd =
    3 coordinators with --store=etcd, --etcd_endpoints and --advertise.
Negative controls: a renamed flag and a probe on a port not exposed must be reported.

Needs kubectl (with kustomize v4 or later, kubectl 1.21+); without it the test fails.
"""

import argparse
import copy
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

POD_OWNERS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"}
KUSTOMIZATIONS = ["overlays/sqlite", "overlays/etcd", "job-pool"]


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def install_layout(install_sh):
    """The files deploy/install.sh installs under its default prefix."""
    text = open(install_sh).read()
    prefix = re.search(r"^prefix=(/\S+)$", text, re.M)
    binaries = re.search(r"^BINARIES=\(([^)]*)\)", text, re.M)
    python_dir = re.search(r'^python_dir="\$destdir\$prefix(/[^"]+)"$', text, re.M)
    if not (prefix and binaries and python_dir):
        fail(f"{install_sh}: cannot find prefix=, BINARIES=( ... ) and python_dir= in it")
    prefix = prefix.group(1)
    files = {f"{prefix}/bin/{b.split('/')[-1]}" for b in binaries.group(1).split()}
    return prefix, files, {prefix + python_dir.group(1)}


def binary_flags(binary):
    out = subprocess.run([binary, "--helpfull"], capture_output=True, text=True)
    flags = set(re.findall(r"^\s+--([A-Za-z0-9_]+)", out.stdout + out.stderr, re.M))
    if len(flags) < 5:
        fail(f"{binary} --helpfull listed {len(flags)} flags:\n{out.stdout}{out.stderr}")
    return flags


def render(kubectl, root, kustomization):
    out = subprocess.run([kubectl, "kustomize", os.path.join(root, kustomization)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"kubectl kustomize deploy/k8s/{kustomization} failed (kustomize v4+, i.e. kubectl "
             f"1.21+, is needed):\n{out.stderr}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def listen_port(value):
    host, _, port = value.rpartition(":")
    return host, int(port) if port.isdigit() else None


def check_container(where, pod, c, ctx, indexed):
    problems = []
    p = lambda msg: problems.append(f"{where}: container {c.get('name')}: {msg}")
    command = c.get("command") or []
    if not command:
        p("no command: it must name the installed binary")
        return problems
    binary = command[0]
    if binary not in ctx["files"]:
        p(f"command {binary} is not in deploy/install.sh's layout {sorted(ctx['files'])}")
    args = list(command[1:]) + list(c.get("args") or [])
    env_names = [e["name"] for e in c.get("env") or []]
    defined = set(env_names) | ({"JOB_COMPLETION_INDEX"} if indexed else set())
    for i, e in enumerate(c.get("env") or []):
        for var in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", e.get("value") or ""):
            if var not in env_names[:i] and not (indexed and var == "JOB_COMPLETION_INDEX"):
                p(f"env {e['name']} names $({var}), not a variable defined before it")
    for a in args:
        for var in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", a):
            if var not in defined:
                p(f"argument {a} names $({var}), which the container does not define")
        for path in re.findall(r"(?:^|[=,])(/[^,=\s]*)", a):
            if path.startswith(ctx["prefix"] + "/") and path not in ctx["files"] | ctx["dirs"]:
                p(f"argument {a}: {path} is not in deploy/install.sh's layout")
    name = binary.rsplit("/", 1)[-1]
    flags = {}
    if name in ctx["helpfull"]:
        for a in args:
            if not a.startswith("--"):
                p(f"argument {a} is not a --flag")
                continue
            flag, _, value = a[2:].partition("=")
            if flag not in ctx["helpfull"][name]:
                p(f"{name} has no flag --{flag} (its --helpfull does not list it)")
            flags[flag] = value
    ports = {pt.get("name"): pt["containerPort"] for pt in c.get("ports") or []}
    numbers = set(ports.values())
    tls_ports = set()
    for flag in ("listen", "http_listen", "admin_listen"):
        if flag in flags:
            host, port = listen_port(flags[flag])
            if port not in numbers:
                p(f"--{flag}={flags[flag]}: port {port} is not a containerPort")
            if host not in ("0.0.0.0", "[::]", ""):
                p(f"--{flag}={flags[flag]}: binds {host}, which probes and Services cannot reach")
            if flag == "listen" and "insecure" not in flags:
                tls_ports.add(port)
    for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
        probe = c.get(kind)
        if not probe:
            if kind != "startupProbe":
                p(f"no {kind}")
            continue
        for handler in ("httpGet", "tcpSocket", "grpc"):
            if handler not in probe:
                continue
            port = probe[handler].get("port")
            if handler == "grpc" and not isinstance(port, int):
                p(f"{kind}: grpc port {port!r} must be a number")
            elif not (port in numbers or port in ports):
                p(f"{kind}: {handler} port {port!r} is not a port the container exposes")
            number = ports.get(port, port)
            if handler == "grpc" and number in tls_ports:
                p(f"{kind}: grpc on {number}, a mutual-TLS port: the kubelet's probe cannot connect")
    sc = c.get("securityContext") or {}
    psc = pod.get("securityContext") or {}
    if not (sc.get("runAsNonRoot") or psc.get("runAsNonRoot")):
        p("securityContext: runAsNonRoot is not set")
    if sc.get("readOnlyRootFilesystem") is not True:
        p("securityContext: readOnlyRootFilesystem is not true")
    if sc.get("allowPrivilegeEscalation") is not False:
        p("securityContext: allowPrivilegeEscalation is not false")
    if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
        p("securityContext: capabilities.drop lacks ALL")
    if "tls_dir" in flags:
        secrets = {v["name"] for v in pod.get("volumes") or [] if "secret" in v}
        mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts") or []}
        if mounts.get(flags["tls_dir"]) not in secrets:
            p(f"--tls_dir={flags['tls_dir']} is not a mounted Secret")
    return problems


def check_documents(label, docs, ctx):
    problems = []
    for d in docs:
        if d.get("kind") not in POD_OWNERS:
            continue
        spec = d["spec"]
        pod = spec["template"]["spec"]
        indexed = d["kind"] == "Job" and spec.get("completionMode") == "Indexed"
        where = f"{label}: {d['kind']}/{d['metadata']['name']}"
        for c in (pod.get("initContainers") or []) + pod["containers"]:
            problems += check_container(where, pod, c, ctx, indexed)
    return problems


def coordinator(docs):
    found = [d for d in docs if d["kind"] == "StatefulSet"
             and d["metadata"]["name"] == "ringleader-coordinator"]
    if len(found) != 1:
        fail("no StatefulSet ringleader-coordinator")
    c = found[0]["spec"]["template"]["spec"]["containers"][0]
    return found[0], dict(a[2:].partition("=")[::2] for a in c.get("args") or []), c


def check_shapes(rendered):
    problems = []
    sts, flags, c = coordinator(rendered["overlays/sqlite"])
    if sts["spec"].get("replicas") != 1 or flags.get("store") != "sqlite":
        problems.append("overlays/sqlite: not 1 replica with --store=sqlite")
    claims = {t["metadata"]["name"] for t in sts["spec"].get("volumeClaimTemplates") or []}
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts") or []}
    if mounts.get(flags.get("state_dir")) not in claims:
        problems.append("overlays/sqlite: --state_dir is not on a volumeClaimTemplate")
    sts, flags, c = coordinator(rendered["overlays/etcd"])
    if sts["spec"].get("replicas") != 3 or flags.get("store") != "etcd":
        problems.append("overlays/etcd: not 3 replicas with --store=etcd")
    for flag in ("etcd_endpoints", "advertise"):
        if not flags.get(flag):
            problems.append(f"overlays/etcd: no --{flag}")
    jobs = [d for d in rendered["job-pool"] if d["kind"] == "Job"]
    if not jobs or jobs[0]["spec"].get("completionMode") != "Indexed":
        problems.append("job-pool: no Job with completionMode: Indexed")
    return problems


def negative_controls(rendered, ctx):
    docs = copy.deepcopy(rendered["overlays/sqlite"])
    worker = next(d for d in docs if d["kind"] == "DaemonSet")
    c = worker["spec"]["template"]["spec"]["containers"][0]
    c["args"] = [a.replace("--admin_listen=", "--admin_listn=") for a in c["args"]]
    c["livenessProbe"] = {"tcpSocket": {"port": 7999}}
    problems = "\n".join(check_documents("negative control", docs, ctx))
    for expected in ("no flag --admin_listn", "port 7999 is not a port"):
        if expected not in problems:
            fail(f"negative control: '{expected}' was not reported; got:\n{problems}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kustomization", required=True, help="deploy/k8s/base/kustomization.yaml")
    parser.add_argument("--install_sh", required=True)
    parser.add_argument("--coordinator", required=True)
    parser.add_argument("--worker", required=True)
    args = parser.parse_args()

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        fail("kubectl not found: install it (Debian package kubernetes-client, or upstream's "
             "kubectl 1.21 or later); this test renders deploy/k8s with `kubectl kustomize`")
    prefix, files, dirs = install_layout(args.install_sh)
    ctx = {"prefix": prefix, "files": files, "dirs": dirs,
           "helpfull": {"ringleader-coordinator": binary_flags(args.coordinator),
                        "ringleader-worker": binary_flags(args.worker)}}

    # kustomize refuses files reached through symlinks out of its root: render a real copy.
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as tmp:
        root = os.path.join(tmp, "k8s")
        shutil.copytree(os.path.dirname(os.path.dirname(args.kustomization)), root, symlinks=False)
        rendered = {k: render(kubectl, root, k) for k in KUSTOMIZATIONS}

    problems = []
    for label, docs in rendered.items():
        problems += check_documents(label, docs, ctx)
    problems += check_shapes(rendered)
    negative_controls(rendered, ctx)
    if problems:
        fail("deploy/k8s:\n  " + "\n  ".join(problems))
    containers = sum(len(d["spec"]["template"]["spec"]["containers"])
                     for docs in rendered.values() for d in docs if d.get("kind") in POD_OWNERS)
    print(f"PASS: {len(rendered)} kustomizations, {containers} containers checked")


if __name__ == "__main__":
    main()
