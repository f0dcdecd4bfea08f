"""Measurements: ``GET /v1/measurements``; adding and removing need the admin token."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Response, status
from pydantic import BaseModel, Field

from optimizer.measurement import Measurement, checked
from service.api.deps import AdminDep, StoreDep

router = APIRouter(prefix="/v1", tags=["measurements"])

_ADMIN = {401: {"description": "no admin token"}, 403: {"description": "wrong token or admin disabled"}}


class MeasurementList(BaseModel):
    measurements: list[Measurement]


class Removed(BaseModel):
    removed: str = Field(description="the id of the measurement removed")


@router.get("/measurements", response_model=MeasurementList)
def list_measurements(store: StoreDep) -> MeasurementList:
    """Every stored measurement, newest first."""
    from pricing.store.measurements import list_measurements as stored

    return MeasurementList(measurements=stored(store))


@router.post("/measurements", response_model=Measurement, status_code=status.HTTP_201_CREATED,
             responses={200: {"description": "already stored (same content, same id)"}, **_ADMIN})
def add_measurement(_: AdminDep, record: Measurement, store: StoreDep, response: Response) -> Measurement:
    """Store one Measurement (``gpucost probe --json`` prints one). Checked first: a record with
    an unknown GPU, figures in other units, or of another model than its workload is a 422 naming
    the field, and nothing is stored."""
    from pricing.store.measurements import add_measurement as add

    m, created = add(store, checked(record))
    if not created:
        response.status_code = status.HTTP_200_OK
    return m


@router.delete("/measurements/{measurement_id}", response_model=Removed,
               responses={404: {"description": "no measurement of that id"}, **_ADMIN})
def remove_measurement(
    _: AdminDep, store: StoreDep,
    measurement_id: Annotated[str, Path(max_length=64, pattern=r"^[A-Za-z0-9._-]+$")],
) -> Removed:
    """Remove one measurement: answers go back to the model's figures for its recipe."""
    from pricing.store.measurements import remove_measurement as remove

    if not remove(store, measurement_id):
        raise HTTPException(status_code=404, detail=f"no measurement {measurement_id!r}")
    return Removed(removed=measurement_id)
