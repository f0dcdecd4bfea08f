"""AWS Service Quotas: the EC2 vCPU limits GPU instances count against, on demand and spot.

One ``get_service_quota`` per code and region (the codes ``optimizer.quotas`` maps instance
families to). A code the account has no applied value for answers ``NoSuchResourceException``;
then the AWS default (``get_aws_default_service_quota``) is the limit in force.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from optimizer.errors import MissingCredentials, ProviderError
from optimizer.quotas import QuotaLimit, aws_codes

SERVICE_CODE = "ec2"
_RETRIABLE = {"ThrottlingException", "TooManyRequestsException", "ServiceException"}


def _error(exc: Exception) -> ProviderError:
    from botocore import exceptions as bexc

    if isinstance(exc, bexc.NoCredentialsError):
        return MissingCredentials("aws", str(exc))
    if isinstance(exc, bexc.ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        return ProviderError("aws", f"service quotas: {code}: {exc}", code in _RETRIABLE)
    return ProviderError("aws", f"service quotas: {type(exc).__name__}: {exc}")


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


class AwsQuotaReader:
    name = "aws"

    def __init__(self, clients: Mapping[str, Any], codes: Iterable[str] | None = None) -> None:
        self.clients = dict(clients)  # region -> boto3 "service-quotas" client
        self.codes = list(codes) if codes is not None else aws_codes()

    @classmethod
    def from_settings(cls, settings: Any) -> AwsQuotaReader:
        import boto3
        from botocore.config import Config

        session = boto3.Session()
        if session.get_credentials() is None:
            raise MissingCredentials("aws", "no credentials in the AWS credential chain")
        config = Config(retries={"max_attempts": 8, "mode": "adaptive"})
        return cls({r: session.client("service-quotas", region_name=r, config=config) for r in settings.aws_regions})

    def read(self) -> list[QuotaLimit]:
        from botocore.exceptions import BotoCoreError, ClientError

        out: list[QuotaLimit] = []
        for region, quotas_client in self.clients.items():
            for code in self.codes:
                source = "aws-service-quotas"
                try:
                    try:
                        got = quotas_client.get_service_quota(ServiceCode=SERVICE_CODE, QuotaCode=code)
                    except ClientError as exc:
                        if _error_code(exc) != "NoSuchResourceException":
                            raise
                        got = quotas_client.get_aws_default_service_quota(ServiceCode=SERVICE_CODE, QuotaCode=code)
                        source = "aws-service-quotas:default"
                except ClientError as exc:
                    if _error_code(exc) == "NoSuchResourceException":
                        continue  # no such quota in this region: the code stays unknown there
                    raise _error(exc) from exc
                except BotoCoreError as exc:
                    raise _error(exc) from exc
                quota = got.get("Quota") or {}
                value = quota.get("Value")
                if value is None:
                    continue
                out.append(QuotaLimit("aws", region, code, float(value), source=source, name=quota.get("QuotaName")))
        return out
