"""GCP Compute Engine quotas: GPU metrics per region (``regions.get``) and ``GPUS_ALL_REGIONS``
for the project (``projects.get``). Limits count GPUs; only GPU metrics are kept."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from optimizer.errors import ProviderError
from optimizer.quotas import GLOBAL, QuotaLimit


def _gpu_quotas(quotas: Iterable[Any], region: str, source: str) -> list[QuotaLimit]:
    out = []
    for q in quotas:
        metric = str(getattr(q, "metric", "") or "")
        if "GPUS" not in metric:
            continue
        limit = getattr(q, "limit", None)
        if limit is None:
            continue
        out.append(QuotaLimit("gcp", region, metric, float(limit), source=source))
    return out


class GcpQuotaReader:
    name = "gcp"

    def __init__(self, project: str, regions: Iterable[str], regions_client: Any, projects_client: Any) -> None:
        self.project = project
        self.regions = tuple(regions)
        self.regions_client = regions_client
        self.projects_client = projects_client

    @classmethod
    def from_settings(cls, settings: Any) -> GcpQuotaReader:
        from google.cloud import compute_v1

        from pricing.adapters.gcp import gcp_credentials

        credentials, project = gcp_credentials(settings)
        return cls(
            project, settings.gcp_regions,
            compute_v1.RegionsClient(credentials=credentials), compute_v1.ProjectsClient(credentials=credentials),
        )

    def read(self) -> list[QuotaLimit]:
        from google.api_core import exceptions as gexc

        out: list[QuotaLimit] = []
        try:
            for region in self.regions:
                got = self.regions_client.get(project=self.project, region=region)
                out.extend(_gpu_quotas(got.quotas, region, "gcp-compute:regions.get"))
            project = self.projects_client.get(project=self.project)
            out.extend(_gpu_quotas(project.quotas, GLOBAL, "gcp-compute:projects.get"))
        except gexc.GoogleAPICallError as exc:
            retriable = isinstance(exc, (gexc.TooManyRequests, gexc.ServiceUnavailable, gexc.InternalServerError))
            raise ProviderError("gcp", f"compute quotas: {exc}", retriable) from exc
        return out
