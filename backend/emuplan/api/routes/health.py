"""Liveness: answers when the app is up and its database answers."""

from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel
from sqlalchemy import text

from emuplan.api.deps import ReadSessionDep

router = APIRouter(prefix="/api/health", tags=["health"])


class Health(BaseModel):
    status: Literal["ok"]


@router.get("", name="health", response_model=Health)
def health(session: ReadSessionDep) -> dict:
    session.exec(text("SELECT 1"))
    return {"status": "ok"}
