"""Liveness: answers when the app is up and its database answers."""

from fastapi import APIRouter
from sqlalchemy import text

from emuplan.api.deps import ReadSessionDep

router = APIRouter(tags=["health"])


@router.get("/api/health")
def health(session: ReadSessionDep) -> dict:
    session.exec(text("SELECT 1"))
    return {"status": "ok"}
