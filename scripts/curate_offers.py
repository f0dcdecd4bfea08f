"""Curation of the bundled offers: picks rows from ../shared/reference into
pricing/snapshot/data/offers.csv. Not shipped; the CSV it writes is the curated artefact (each row
keeps its source). Run from the repository root: .venv/bin/python scripts/curate_offers.py"""
import csv, math, sys
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "reference"
import pandas as pd
sys.path.insert(0, str(ROOT))
from optimizer.estimator.gpus import find_gpu, gpu_spec

REF = str(SHARED / "skypilot-catalog")
GIB = 1.073741824
AS_OF_V8 = "2025-11-30T00:00:00Z"
COLS = ["provider","region","zone","instance_type","gpu","gpu_count","gpu_vram_gb","vcpus","ram_gb",
        "price_hour","spot_price_hour","currency","price_hour_native","spot_price_hour_native",
        "billing_increment_s","min_billing_s","interconnect","source","as_of"]
rows = []

def fmt(x):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return repr(round(float(x), 6)).rstrip("0").rstrip(".") if isinstance(x, float) else str(x)

def add(**r):
    gpu = find_gpu(r["gpu"])
    assert gpu, r
    r["gpu"] = gpu
    r.setdefault("gpu_vram_gb", gpu_spec(gpu).vram_gb)
    rows.append(r)

# ---- AWS
a = pd.read_csv(f"{REF}/aws/vms.csv")
fams = ("p3.", "g4dn.", "g5.", "g6.", "g6e.", "p4d.", "p4de.", "p5.")
a = a[a.InstanceType.str.startswith(fams)]
for (it, region), grp in a.groupby(["InstanceType", "Region"]):
    if region not in ("us-east-1", "us-west-2", "eu-west-1"):
        continue
    prices = grp.Price.dropna().unique()
    if len(prices) != 1:
        continue
    spot = grp.SpotPrice.dropna()
    spot = spot[spot > 0]
    sp = float(spot.min()) if len(spot) else None
    az = grp.loc[spot.idxmin(), "AvailabilityZone"] if len(spot) else None
    n = float(grp.AcceleratorCount.iloc[0])
    ic = None if n <= 1 else ("nvlink" if it.startswith("p") else "pcie")
    src = ("snapshot of skypilot-catalog v8 aws/vms.csv (stored-version commit 00148f2a); on-demand Linux "
           f"list price; spot = cheapest AZ in region ({az}) " if sp else
           "snapshot of skypilot-catalog v8 aws/vms.csv (stored-version commit 00148f2a); on-demand Linux list price; no spot price in catalog ")
    src += "; catalog judged late 2025 (prices-notes.md s.1), as_of approximate; RAM GiB->GB"
    add(provider="aws", region=region, zone="", instance_type=it, gpu=grp.AcceleratorName.iloc[0],
        gpu_count=int(n), vcpus=float(grp.vCPUs.iloc[0]), ram_gb=round(float(grp.MemoryGiB.iloc[0]) * GIB, 2),
        price_hour=float(prices[0]), spot_price_hour=sp, currency="USD", price_hour_native=float(prices[0]),
        spot_price_hour_native=sp, billing_increment_s=1, min_billing_s=60, interconnect=ic,
        source=src, as_of=AS_OF_V8)

# ---- GCP: host row + accelerator row in the same zone, as GCP bills a GPU VM
g = pd.read_csv(f"{REF}/gcp/vms.csv")
host = g[g.InstanceType.notna()]
acc = g[g.InstanceType.isna()]
combos = [("a2-highgpu-1g","A100",1),("a2-highgpu-2g","A100",2),("a2-highgpu-4g","A100",4),("a2-highgpu-8g","A100",8),
          ("a2-ultragpu-1g","A100-80GB",1),("a2-ultragpu-8g","A100-80GB",8),("a3-highgpu-8g","H100",8),
          ("g2-standard-4","L4",1),("g2-standard-8","L4",1),("g2-standard-24","L4",2),("g2-standard-48","L4",4),
          ("n1-highmem-8","T4",1),("n1-highmem-8","V100",1),("n1-highmem-16","T4",2),("n1-highmem-32","V100",4)]
for region in ("us-central1", "us-west1", "europe-west4", "us-east4"):
    for it, gname, cnt in combos:
        hz = host[(host.InstanceType == it) & (host.Region == region)]
        az_ = acc[(acc.AcceleratorName == gname) & (acc.AcceleratorCount == cnt) & (acc.Region == region)]
        if hz.empty or az_.empty:
            continue
        m = hz.merge(az_, on="AvailabilityZone", suffixes=("_h", "_a"))
        if m.empty:
            continue
        m["od"] = m.Price_h + m.Price_a
        m["sp"] = m.SpotPrice_h + m.SpotPrice_a
        ods = m.od.round(6).unique()
        if len(ods) != 1:
            continue
        best = m.loc[m.sp.idxmin()]
        od = round(float(ods[0]), 6); sp = round(float(best.sp), 6)
        name = it if it.startswith(("a2", "a3", "g2")) else f"{it}+{cnt}x{gname}"
        ic = None if cnt <= 1 else ("nvlink" if it.startswith(("a2", "a3")) else "pcie")
        src = (f"snapshot of skypilot-catalog v8 gcp/vms.csv (stored-version commit 006059e0): host {it} "
               f"{float(best.Price_h):g} + accelerator {cnt}x{gname} {float(best.Price_a):g} USD/h; spot = cheapest zone "
               f"({best.AvailabilityZone}) host+accelerator spot; catalog judged late 2025, as_of approximate; RAM GiB->GB")
        add(provider="gcp", region=region, zone="", instance_type=name, gpu=gname, gpu_count=cnt,
            vcpus=float(best.vCPUs_h), ram_gb=round(float(best.MemoryGiB_h) * GIB, 2), price_hour=od,
            spot_price_hour=sp if sp > 0 else None, currency="USD", price_hour_native=od,
            spot_price_hour_native=sp if sp > 0 else None, billing_increment_s=1, min_billing_s=60,
            interconnect=ic, source=src, as_of=AS_OF_V8)

# ---- other clouds: a handful of 1x and 8x rows each
def pick(cloud, wanted, commit, version="v8", note=""):
    d = pd.read_csv(f"{REF}/{cloud}/vms.csv")
    for it, region in wanted:
        r = d[(d.InstanceType == it) & (d.Region == region)]
        if r.empty:
            print("missing", cloud, it, region); continue
        r = r.iloc[0]
        sp = float(r.SpotPrice) if "SpotPrice" in r and pd.notna(r.SpotPrice) and float(r.SpotPrice) > 0 else None
        n = int(float(r.AcceleratorCount))
        gname = r.AcceleratorName
        ic = None if n <= 1 else ("nvlink" if any(k in it.lower() for k in ("sxm", "h100", "h200", "b200")) else "pcie")
        src = f"snapshot of skypilot-catalog {version} {cloud}/vms.csv (stored-version commit {commit}); {note}billing terms not sourced (defaults: 1 s increments, 60 s minimum); RAM GiB->GB"
        add(provider=cloud, region=region, zone=str(r.AvailabilityZone) if "AvailabilityZone" in r and pd.notna(r.get("AvailabilityZone")) else "",
            instance_type=it, gpu=gname, gpu_count=n, vcpus=float(r.vCPUs), ram_gb=round(float(r.MemoryGiB) * GIB, 2),
            price_hour=float(r.Price), spot_price_hour=sp, currency="USD", price_hour_native=float(r.Price),
            spot_price_hour_native=sp, billing_increment_s=1, min_billing_s=60, interconnect=ic, source=src,
            as_of=AS_OF_V8 if version == "v8" else "2025-06-30T00:00:00Z")

lam = pd.read_csv(f"{REF}/lambda/vms.csv")
print(sorted(lam.InstanceType.unique())); print(sorted(lam.Region.unique()))

gpu_override = {"gpu_1x_h100_pcie": "H100-PCIE", "1x-H100_NVL-32-65536": "H100-NVL"}
def first_region(cloud, it):
    d = pd.read_csv(f"{REF}/{cloud}/vms.csv")
    return d[d.InstanceType == it].Region.iloc[0]

pick("lambda", [(it, "us-east-1") for it in ["gpu_1x_a10","gpu_1x_a100","gpu_1x_a6000","gpu_1x_h100_pcie","gpu_1x_h100_sxm5","gpu_8x_h100_sxm5","gpu_8x_a100_80gb_sxm4"]],
     "0f407038", note="same price in every Lambda region; ")
pick("runpod", [(it, "CA") for it in ["1x_A100-80GB_SECURE","8x_A100-80GB_SECURE","1x_H100-SXM_SECURE","8x_H100-SXM_SECURE","1x_RTX3090_SECURE","1x_RTX4090_SECURE","1x_RTX6000-Ada_SECURE"]],
     "0727c2bd", version="v7", note="SECURE cloud, first datacenter listed; v7 catalog older than v8, as_of approximate; ")
pick("vast", [(it, first_region("vast", it)) for it in ["1x-RTX_4090-32-65536","2x-RTX_4090-32-65536","1x-RTX_5090-32-65536","1x-H100_SXM-32-65536","4x-H100_SXM-32-65536"]],
     "01b8cdda", note="marketplace median of offers, no spot price (catalog SpotPrice 0 = unknown); ")
pick("nebius", [(it, "eu-north1") for it in ["gpu-h100-sxm_1gpu-16vcpu-200gb","gpu-h100-sxm_8gpu-128vcpu-1600gb","gpu-h200-sxm_1gpu-16vcpu-200gb","gpu-h200-sxm_8gpu-128vcpu-1600gb","gpu-l40s-a_1gpu-8vcpu-32gb"]],
     "0082b043")
for r in rows:
    if r["instance_type"] in gpu_override:
        r["gpu"] = gpu_override[r["instance_type"]]; r["gpu_vram_gb"] = gpu_spec(r["gpu"]).vram_gb

# ---- Alibaba Cloud ECS gn-series (CNY list prices, cn-shanghai; USD lowest-over-regions, Spare Cores)
CNY_PER_USD = 7.0197  # fx_rates.csv: CFETS central parity 2026-01-08
china = list(csv.DictReader(open(SHARED / "facts" / "china_gpu_prices.csv", encoding="utf-8")))
for c in china:
    if not c["provider"].startswith("Alibaba Cloud ECS") or c["pricing"] != "on_demand" or c["unit"] != "instance-hour":
        continue
    gname = {"A100 80GB": "A100-80GB", "A100 40GB": "A100", "V100 16GB": "V100", "V100 32GB": "V100-32GB"}.get(c["gpu"], c["gpu"])
    if c["gpu"] == "V100" and c["vram_gb"] == "32":
        gname = "V100-32GB"
    cnt = float(c["gpu_count"])
    if cnt < 1:
        continue  # vGPU slices (sgn7i/vgn6i) are graphics partitions, not training GPUs
    price = float(c["price"])
    srcfull = c["source"].split(";")[0]
    if c["currency"] == "CNY":
        usd = round(price / CNY_PER_USD, 6)
        region = c["region"]
        src = (f"Alibaba ECS pay-as-you-go list price {price} CNY/h, {c['date']}, copied by a third party from ecs-buy.aliyun.com: "
               f"{srcfull}; confidence {c['confidence']}; USD at 7.0197 CNY/USD (CFETS central parity 2026-01-08, fx_rates.csv); "
               "billing increment 1 s taken from the Alibaba ECI billing page (按秒计费, copy at m.bestwisewords.com/zh/eci/product-overview/elastic-container-instances); ECS per-second billing not read directly")
        as_of = "2023-06-17T00:00:00Z"  # post date of the source; prices 'as of 2023.06'
        cur, native = "CNY", price
    else:
        usd = price; region = "lowest-region"; cur, native = "USD", price
        src = (f"Spare Cores dataset field min_ondemand_price_per_hour = lowest pay-as-you-go price over regions (region not named), "
               f"commit date {c['date']}: {srcfull}; confidence {c['confidence']}; billing increment 1 s taken from the Alibaba ECI billing page (按秒计费, copy at m.bestwisewords.com/zh/eci/product-overview/elastic-container-instances); ECS per-second billing not read directly")
        as_of = c["date"] + "T00:00:00Z"
    add(provider="alibaba", region=region, zone="", instance_type=c["instance_or_product"], gpu=gname,
        gpu_count=int(cnt), vcpus=float(c["vcpus"]), ram_gb=float(c["ram_gb"]), price_hour=usd, spot_price_hour=None,
        currency=cur, price_hour_native=native, spot_price_hour_native=None, billing_increment_s=1, min_billing_s=0,
        interconnect=None if cnt <= 1 else ("nvlink" if gname.startswith(("A100", "V100")) else "pcie"),
        source=src, as_of=as_of)

keys = set()
with open(ROOT / "pricing" / "snapshot" / "data" / "offers.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f)
    w.writerow(COLS)
    for r in rows:
        k = (r["provider"], r["region"], r["zone"], r["instance_type"])
        assert k not in keys, k
        keys.add(k)
        w.writerow([fmt(r.get(c)) if not isinstance(r.get(c), str) else r.get(c) for c in COLS])
from collections import Counter
print(Counter(r["provider"] for r in rows), len(rows))
