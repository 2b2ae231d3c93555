"""The one way to a Kubernetes client, for the operator, the REST API and the SDK alike, as kubectl finds its
cluster: the kubeconfig named, else $KUBECONFIG, else ~/.kube/config when it exists, else the pod's own
ServiceAccount. Also the default namespace that goes with it."""

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

IN_CLUSTER = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# What reading a kubeconfig raises when it is not one: libyaml's errors, and the client's on a wrong shape.
KUBECONFIG_ERRORS = (config.ConfigException, OSError, yaml.YAMLError, TypeError, AttributeError, KeyError, ValueError)


class NoCluster(Exception):  # noqa: N818  (an outcome a caller reports, not a bug)
    """Neither a usable kubeconfig nor a pod's ServiceAccount: nothing to talk to. `kubeconfig` is the file that
    could not be used, None when there was none."""

    def __init__(self, message: str, kubeconfig: str | None = None) -> None:
        super().__init__(message)
        self.kubeconfig = kubeconfig


@dataclass(frozen=True)
class Connection:
    """A client (one connection pool, shared by every API group object made from it) and the namespace the
    kubeconfig's context names (the pod's own in a cluster; "default" when none is named)."""

    api: Any  # kubernetes.client.ApiClient
    namespace: str

    def close(self) -> None:
        self.api.close()


def own_namespace() -> str:
    """The namespace this process runs in when it runs in a pod; "" outside a cluster."""
    path = IN_CLUSTER / "namespace"
    return path.read_text().strip() if path.is_file() else ""


def connect(
    kubeconfig: str | Path | None = None,
    *,
    context: str | None = None,
    pool_size: int | None = None,
    retries: int | None = None,
) -> Connection:
    """A client for the kubeconfig named (and its `context`), $KUBECONFIG, ~/.kube/config, or the pod's account.
    `pool_size` bounds the connections kept open (the operator writes in parallel); `retries`, when given,
    replaces urllib3's (the operator retries itself, with its own backoff). Raises NoCluster."""
    path = str(kubeconfig or os.environ.get("KUBECONFIG") or Path.home() / ".kube" / "config")
    configuration = client.Configuration()
    if kubeconfig or Path(path.split(os.pathsep, maxsplit=1)[0]).exists():
        namespace = _from_kubeconfig(configuration, path, context)
    else:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException as error:
            raise NoCluster(f"no cluster to talk to: {error}") from None
        namespace = own_namespace()
    if pool_size is not None:
        configuration.connection_pool_maxsize = pool_size
    if retries is not None:
        configuration.retries = retries
    return Connection(client.ApiClient(configuration), namespace or "default")


def _from_kubeconfig(configuration: Any, path: str, context: str | None) -> str:
    """Load the kubeconfig's context into `configuration`; the context's namespace ("" if it names none)."""
    try:
        contexts, current = config.list_kube_config_contexts(config_file=path)
        chosen = next((c for c in contexts if c["name"] == context), None) if context else current
        if chosen is None:
            raise NoCluster(f"the kubeconfig {path} has no context {context!r}", path)
        config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
    except NoCluster:
        raise
    except KUBECONFIG_ERRORS as error:
        raise NoCluster(f"the kubeconfig {path} cannot be used: {' '.join(str(error).split())}", path) from None
    return str((chosen.get("context") or {}).get("namespace") or "")
