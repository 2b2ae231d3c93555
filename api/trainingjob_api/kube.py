"""The API's own Kubernetes identity: one client (kube.client.connect: the kubeconfig set, else the pod's account)."""

from dataclasses import dataclass
from typing import Any

from kubernetes import client

from trainingjob.kube.client import connect
from trainingjob_api.settings import ApiSettings


@dataclass(frozen=True)
class Kube:
    """The API's own connection (one pool): `api` also serves state.jobs (trainingjob_sdk's KubeJobs), through
    which every call about jobs, their pods and their events goes; `custom` is the job cache's LIST and WATCH;
    `authn` and `authz` ask TokenReview and SubjectAccessReview."""

    api: Any
    custom: Any
    authn: Any
    authz: Any
    timeout: float

    @classmethod
    def connect(cls, settings: ApiSettings) -> "Kube":
        api = connect(settings.kubeconfig).api
        return cls(
            api=api,
            custom=client.CustomObjectsApi(api),
            authn=client.AuthenticationV1Api(api),
            authz=client.AuthorizationV1Api(api),
            timeout=settings.kubernetes_timeout_seconds,
        )

    def readyz(self, timeout: float) -> int:
        """The HTTP status of the apiserver's own /readyz (200: it serves, its storage included), asked once: no
        retries, so `timeout` bounds the wait; urllib3's errors as they are when it does not answer."""
        method, url, headers, _, _ = self.api.param_serialize("GET", "/readyz", auth_settings=["BearerToken"])
        pool = self.api.rest_client.pool_manager  # the client's own TLS settings, credentials and connections
        response = pool.request(method, url, headers=headers, timeout=timeout, retries=False)
        return int(response.status)

    def close(self) -> None:
        self.api.close()
