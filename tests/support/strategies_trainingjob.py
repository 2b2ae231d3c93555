"""Hypothesis strategies for TrainingJob manifests: every field that reaches a pod, drawn from the shapes the
schema allows (names, label keys and values, quantities, volumes, security) and some it does not, so that the
apiserver and pydantic can be held to the same verdict and the pods built from an accepted job to admission."""

from typing import Any

from hypothesis import strategies as st

Manifest = dict[str, Any]

DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?"
LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,70}[A-Za-z0-9])?"  # up to 72: beyond the 63 a label name may have
label_value = st.one_of(
    st.from_regex(r"(([A-Za-z0-9][-A-Za-z0-9_.]{0,64})?[A-Za-z0-9])?", fullmatch=True),
    st.integers(60, 66).map(lambda n: "v" * n),
)
label_key = st.one_of(
    st.from_regex(rf"({DNS_LABEL}(\.{DNS_LABEL}){{0,2}}/)?{LABEL_NAME}", fullmatch=True),
    st.integers(60, 66).map(lambda n: "a" * n),  # around the 63 characters a label name may have
)
dns_label = st.from_regex(DNS_LABEL, fullmatch=True)
object_name = st.from_regex(rf"{DNS_LABEL}(\.{DNS_LABEL}){{0,2}}", fullmatch=True)
text = st.text(st.characters(codec="utf-8"), max_size=24)
quantity = st.one_of(
    st.integers(0, 10**6).map(str),
    st.sampled_from(["500m", "1.5", "2Gi", "512Mi", "1e3", "0.25", "1k", "3E", "+1", ".5"]),
)
path = st.from_regex(r"/[a-z0-9]{1,8}(/[a-z0-9._-]{1,8}){0,2}", fullmatch=True)
ids = st.integers(0, 70000)
# Objects a pod names that admission looks up: the tests create these.
SERVICE_ACCOUNTS = ("default", "trainer")
PRIORITY_CLASSES = ("tj-high", "tj-low")
RUNTIME_CLASSES = ("runc", "gvisor")


@st.composite
def resources(draw: st.DrawFn) -> Manifest:
    names = st.sampled_from(["cpu", "memory", "ephemeral-storage", "nvidia.com/gpu", "example.com/fpga"])
    requests = draw(st.dictionaries(names, quantity, max_size=3))
    limits = draw(st.dictionaries(names, quantity, max_size=3))
    return {kind: amounts for kind, amounts in (("requests", requests), ("limits", limits)) if amounts}


@st.composite
def volumes(draw: st.DrawFn) -> tuple[list[Manifest], list[Manifest]]:
    """Volumes with unique names and a mount for some of them."""
    names = draw(st.lists(dns_label, max_size=3, unique=True))
    sources = st.one_of(
        st.builds(lambda size: {"emptyDir": {"sizeLimit": size} if size else {}}, st.none() | quantity),
        st.builds(lambda n: {"configMap": {"name": n}}, object_name),
        st.builds(lambda n: {"secret": {"secretName": n}}, object_name),
        st.builds(
            lambda n, ro: {"persistentVolumeClaim": {"claimName": n, "readOnly": ro}}, object_name, st.booleans()
        ),
    )
    found = [{"name": name, **draw(sources)} for name in names]
    mounted = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    paths = draw(st.lists(path, min_size=len(mounted), max_size=len(mounted), unique=True))
    return found, [{"name": n, "mountPath": p} for n, p in zip(mounted, paths, strict=True)]


@st.composite
def security(draw: st.DrawFn) -> Manifest:
    fields = {
        "runAsUser": ids,
        "runAsGroup": ids,
        "fsGroup": ids,
        "runAsNonRoot": st.booleans(),
        "allowPrivilegeEscalation": st.booleans(),
        "addCapabilities": st.lists(st.sampled_from(["NET_BIND_SERVICE", "IPC_LOCK", "SYS_PTRACE"]), unique=True),
        "seccompProfile": st.sampled_from(["RuntimeDefault", "Unconfined"]),
        "fsGroupChangePolicy": st.sampled_from(["OnRootMismatch", "Always"]),
        "supplementalGroups": st.lists(ids, max_size=3, unique=True),
    }
    chosen = draw(st.lists(st.sampled_from(sorted(fields)), unique=True, max_size=4))
    return {name: draw(fields[name]) for name in chosen}


env_vars = st.lists(
    st.fixed_dictionaries({"name": st.from_regex(r"[-._a-zA-Z][-._a-zA-Z0-9]{0,12}", fullmatch=True)}).flatmap(
        lambda e: st.builds(lambda v: {**e, "value": v}, text)
    ),
    max_size=3,
    unique_by=lambda e: e["name"],
)
env_from = st.lists(
    st.fixed_dictionaries(
        {"configMapRef": st.fixed_dictionaries({"name": object_name})},
        optional={"prefix": st.from_regex(r"[A-Z][A-Z_]{0,6}", fullmatch=True)},
    ),
    max_size=2,
)
containers = st.lists(
    st.fixed_dictionaries(
        {"name": dns_label, "image": st.from_regex(r"[a-z0-9.-]{1,20}(:[A-Za-z0-9._-]{1,10})?", fullmatch=True)},
        optional={
            "command": st.lists(text, min_size=1, max_size=2),
            "env": env_vars,
            "envFrom": env_from,
            "resources": resources(),
            "securityContext": st.fixed_dictionaries(
                {},
                optional={"runAsUser": ids, "runAsNonRoot": st.booleans(), "allowPrivilegeEscalation": st.booleans()},
            ),
        },
    ),
    max_size=2,
    unique_by=lambda c: c["name"],
)
spread = st.lists(
    st.fixed_dictionaries(
        {
            "maxSkew": st.integers(0, 3),
            "topologyKey": label_key,
            "whenUnsatisfiable": st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]),
        },
        optional={"minDomains": st.integers(1, 3)},
    ),
    max_size=2,
)


@st.composite
def role(draw: st.DrawFn, *, command: bool, workers: bool) -> Manifest:
    spec: Manifest = {"replicas": draw(st.integers(1, 3))}
    if workers:
        spec["nprocPerPod"] = draw(st.integers(1, 4))
    if command:
        spec["image"] = draw(
            st.from_regex(r"[a-z0-9.-]{1,20}(/[a-z0-9._-]{1,12})?(:[A-Za-z0-9._-]{1,10})?", fullmatch=True)
        )
        spec["command"] = draw(st.lists(text, min_size=1, max_size=3))
        spec["args"] = draw(st.lists(text, max_size=3))
    optional: dict[str, st.SearchStrategy[Any]] = {
        "env": env_vars,
        "envFrom": env_from,
        "initContainers": containers,
        "sidecars": containers,
        "imagePullSecrets": st.lists(st.fixed_dictionaries({"name": object_name}), max_size=2),
        "podMetadata": st.fixed_dictionaries(
            {},
            optional={
                "labels": st.dictionaries(label_key, label_value, max_size=2),
                "annotations": st.dictionaries(label_key, text, max_size=2),
            },
        ),
        "topologySpreadConstraints": spread,
        "runtimeClassName": st.sampled_from(RUNTIME_CLASSES),
        "shmSize": quantity,
        "resources": resources(),
        "nodeSelector": st.dictionaries(label_key, label_value, max_size=2),
        "tolerations": st.lists(
            st.fixed_dictionaries(
                {"key": label_key, "operator": st.just("Equal"), "value": label_value},
                optional={"effect": st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"])},
            ),
            max_size=2,
        ),
        "serviceAccountName": st.sampled_from(SERVICE_ACCOUNTS),
        "priorityClassName": st.sampled_from(PRIORITY_CLASSES),
        "workingDir": path,
        "securityContext": security(),
        "terminationGracePeriodSeconds": st.integers(0, 90000),
    }
    for name in draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=5)):
        spec[name] = draw(optional[name])
    if draw(st.booleans()):
        spec["volumes"], spec["volumeMounts"] = draw(volumes())
        if not spec["volumeMounts"]:
            del spec["volumeMounts"]
    return spec


@st.composite
def trainingjobs(draw: st.DrawFn) -> Manifest:
    """A TrainingJob manifest: mostly valid, sometimes not (a label name too long, a bad quantity)."""
    parameter_server = draw(st.booleans())
    command = draw(st.booleans())
    spec: Manifest = {
        "mode": "ParameterServer" if parameter_server else "DDP",
        "workers": draw(role(command=command, workers=True)),
    }
    if parameter_server:
        spec["parameterServers"] = draw(role(command=command, workers=False))
    if not command:
        spec["trainer"] = {"steps": draw(st.integers(1, 1000))}
    if draw(st.booleans()):
        spec["checkpoint"] = {
            "path": draw(path),
            "volume": draw(st.sampled_from([{"emptyDir": {}}, {"persistentVolumeClaim": {"claimName": "ckpt"}}])),
            "everySteps": draw(st.integers(1, 100) | st.just("Auto")),
        }
    if draw(st.booleans()):
        spec["scheduling"] = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "queueName": label_value,
                    "priorityClassName": st.sampled_from(PRIORITY_CLASSES),
                    "schedulerName": object_name,
                },
            )
        )
    name = draw(st.from_regex(r"[a-z]([-a-z0-9]{0,30}[a-z0-9])?", fullmatch=True))
    return {"apiVersion": "trainingjob.io/v1alpha1", "kind": "TrainingJob", "metadata": {"name": name}, "spec": spec}
