"""The cloud permissions in infra/iam/ grant exactly the reads the adapters make.

Which calls each adapter makes is read from the adapter's source (the SDK methods it invokes), so
a new call without its permission, or a permission no call needs, fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
IAM = REPO / "infra" / "iam"
ADAPTERS = REPO / "pricing" / "adapters"
QUOTAS = REPO / "pricing" / "quotas"

# Every action any policy here may grant: reads of prices and instance types, nothing else.
READ_ONLY_ALLOWED = {
    "pricing:GetProducts",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeRegions",
    # Commitment prices (pricing/adapters/aws.py): Savings Plans rates, Capacity Block offerings.
    "savingsplans:DescribeSavingsPlansOfferingRates",
    "ec2:DescribeCapacityBlockOfferings",
    "ecs:DescribeInstanceTypes",
    "ecs:DescribePrice",
    "ecs:DescribeSpotPriceHistory",
    "ecs:DescribeRegions",
    "compute.acceleratorTypes.list",
    "compute.acceleratorTypes.get",
    "compute.machineTypes.list",
    "compute.machineTypes.get",
    "compute.regions.list",
    "compute.zones.list",
    # Quotas (pricing/quotas): reads of the account's limits.
    "servicequotas:GetServiceQuota",
    "servicequotas:GetAWSDefaultServiceQuota",
    "compute.regions.get",
    "compute.projects.get",
}
READ_VERB = re.compile(r"^[a-z0-9]+:(Describe|Get|List)[A-Za-z]+$")


def _camel(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


def _source(name: str) -> str:
    return (ADAPTERS / f"{name}.py").read_text(encoding="utf-8")


# Service Quotas operations whose IAM action is not the camel-cased operation name.
_SERVICEQUOTAS_ACTION = {"get_aws_default_service_quota": "GetAWSDefaultServiceQuota"}


def aws_quota_calls() -> set[str]:
    """IAM actions of the Service Quotas operations ``pricing/quotas/aws.py`` invokes."""
    src = (QUOTAS / "aws.py").read_text(encoding="utf-8")
    ops = set(re.findall(r"\bquotas_client\.([a-z_]+)\(", src))
    assert ops, "the AWS quota reader's calls were not found"
    return {f"servicequotas:{_SERVICEQUOTAS_ACTION.get(op, _camel(op))}" for op in ops}


# Compute Engine client -> the permission its ``get`` needs (Compute Engine IAM reference).
_GCP_GET_PERMISSION = {"RegionsClient": "compute.regions.get", "ProjectsClient": "compute.projects.get"}


def gcp_quota_permissions_needed() -> set[str]:
    src = (QUOTAS / "gcp.py").read_text(encoding="utf-8")
    clients = set(re.findall(r"compute_v1\.([A-Za-z]+Client)\(", src))
    unknown = clients - set(_GCP_GET_PERMISSION)
    assert clients and not unknown, f"GCP quota reader uses {unknown or 'no client'}: add its permission here"
    assert re.search(r"_client\.get\(", src)
    return {_GCP_GET_PERMISSION[c] for c in clients}


def _statements(path: Path) -> list[dict]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    statements = doc["Statement"]
    return statements if isinstance(statements, list) else [statements]


def _allowed_actions(path: Path) -> set[str]:
    actions: set[str] = set()
    for st in _statements(path):
        assert st["Effect"] == "Allow", st
        # NotAction / NotResource grant everything *except* a list: never here.
        assert "NotAction" not in st and "NotResource" not in st, st
        listed = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        actions.update(listed)
    return actions


def _assert_read_only(actions: set[str]) -> None:
    assert actions, "a policy that grants nothing"
    for action in actions:
        assert "*" not in action and "?" not in action, f"wildcard action {action}"
        assert action in READ_ONLY_ALLOWED, f"{action} is not a price or instance-type read"


def aws_calls() -> set[str]:
    """IAM actions of the boto3 operations ``pricing/adapters/aws.py`` invokes."""
    src = _source("aws")
    pricing_ops = set(re.findall(r"pricing_client\.([a-z_]+)\(", src))
    ec2_ops = set(re.findall(r'ec2\.get_paginator\("([a-z_]+)"\)', src))
    ec2_ops |= {op for op in re.findall(r"\bec2\.([a-z_]+)\(", src) if op != "get_paginator"}
    plan_ops = set(re.findall(r"savingsplans_client\.([a-z_]+)\(", src))
    assert pricing_ops and ec2_ops, "the AWS adapter's calls were not found"
    return ({f"pricing:{_camel(op)}" for op in pricing_ops} | {f"ec2:{_camel(op)}" for op in ec2_ops}
            | {f"savingsplans:{_camel(op)}" for op in plan_ops})


def alibaba_calls() -> set[str]:
    src = _source("alibaba")
    ops = set(re.findall(r"\bclient\.(describe_[a-z_]+)\(", src))
    assert ops, "the Alibaba adapter's calls were not found"
    return {f"ecs:{_camel(op)}" for op in ops}


# Compute Engine client -> the permission its aggregated list needs (Compute Engine IAM reference:
# aggregatedList requires the resource's ``.list`` permission).
_GCP_CLIENT_PERMISSION = {
    "AcceleratorTypesClient": "compute.acceleratorTypes.list",
    "MachineTypesClient": "compute.machineTypes.list",
}
# Clients whose calls need no IAM permission: the Cloud Billing Catalog is public to any
# authenticated caller.
_GCP_NO_PERMISSION = {"CloudCatalogClient"}


def gcp_permissions_needed() -> set[str]:
    clients = set(re.findall(r"(?:compute_v1|billing_v1)\.([A-Za-z]+Client)\(", _source("gcp")))
    unknown = clients - set(_GCP_CLIENT_PERMISSION) - _GCP_NO_PERMISSION
    assert not unknown, f"GCP adapter uses {unknown}: add its permission to gcp-role.yaml and here"
    assert "aggregated_list" in _source("gcp")
    return {_GCP_CLIENT_PERMISSION[c] for c in clients if c in _GCP_CLIENT_PERMISSION}


def test_aws_policy_grants_exactly_the_adapter_calls() -> None:
    path = IAM / "aws-policy.json"
    assert json.loads(path.read_text())["Version"] == "2012-10-17"
    actions = _allowed_actions(path)
    _assert_read_only(actions)
    assert all(READ_VERB.match(a) for a in actions)
    assert actions == aws_calls() | aws_quota_calls()


def test_alibaba_ram_policy_grants_exactly_the_adapter_calls() -> None:
    path = IAM / "alibaba-ram-policy.json"
    assert json.loads(path.read_text())["Version"] == "1"
    actions = _allowed_actions(path)
    _assert_read_only(actions)
    assert all(READ_VERB.match(a) for a in actions)
    assert actions == alibaba_calls()


def test_gcp_role_grants_exactly_the_compute_lists() -> None:
    role = yaml.safe_load((IAM / "gcp-role.yaml").read_text(encoding="utf-8"))
    assert set(role) >= {"title", "description", "stage", "includedPermissions"}
    permissions = set(role["includedPermissions"])
    _assert_read_only(permissions)
    assert all(p.rsplit(".", 1)[1] in {"list", "get"} for p in permissions)
    assert permissions == gcp_permissions_needed() | gcp_quota_permissions_needed()


def test_the_policy_check_rejects_writes_and_wildcards() -> None:
    for bad in ({"ec2:*"}, {"ec2:RunInstances"}, {"pricing:GetProducts", "ecs:CreateInstance"}, {"*"}):
        try:
            _assert_read_only(bad)
        except AssertionError:
            continue
        raise AssertionError(f"{bad} passed the read-only check")


def test_readme_names_every_permission() -> None:
    readme = (IAM / "README.md").read_text(encoding="utf-8")
    granted = (
        _allowed_actions(IAM / "aws-policy.json")
        | _allowed_actions(IAM / "alibaba-ram-policy.json")
        | set(yaml.safe_load((IAM / "gcp-role.yaml").read_text())["includedPermissions"])
    )
    for permission in granted:
        assert f"`{permission}`" in readme, permission
