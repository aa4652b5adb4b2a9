"""A multi-tenant project tracker, written as FastAPI's docs teach: OAuth2 scopes with ``Security(...)`` and
``SecurityScopes`` (401 with ``WWW-Authenticate: Bearer scope=...``), a middleware that puts the tenant on
``request.state`` for a dependency to read, an app-level ``FastAPI(dependencies=...)``, the app's own exception
types with their handlers (a 403, a 429 with ``Retry-After``), a class dependency with its own query parameters
(pagination), UUID and enum path parameters, ``Annotated`` parameters, background tasks,
``response_model_exclude``/``_exclude_unset``/``_exclude_defaults`` and aliases, a ``JSONResponse(status_code=404)``,
a 503 with ``Retry-After`` and a redirect.
"""

import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from enum import Enum
from typing import Annotated, Any
from uuid import UUID

import jwt
from fastapi import (
    APIRouter,
    BackgroundTasks,
    Depends,
    FastAPI,
    Header,
    HTTPException,
    Path,
    Query,
    Request,
    Security,
)
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.security import OAuth2PasswordBearer, SecurityScopes
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from agentmw import Agent

from ._exposure import Exposure, app_factory, as_skill, as_tool, attach_agent, connect, database_of

__all__ = [
    "ACME_PROJECT",
    "EMPTY_PROJECT",
    "GLOBEX_PROJECT",
    "app",  # noqa: F822 - built on first access by the module's __getattr__ (app_factory)
    "build_agent",
    "create_api",
    "create_app",
    "init_db",
    "issue_token",
    "new_id",
    "utc_now",
]

SECRET_KEY = "projects-signing-key-keep-it-out-of-git-0123"
ACME_PROJECT = UUID("11111111-0000-4000-8000-000000000001")
EMPTY_PROJECT = UUID("11111111-0000-4000-8000-000000000002")
GLOBEX_PROJECT = UUID("22222222-0000-4000-8000-000000000001")
SEEDED_AT = "2026-01-15T09:30:00+00:00"


def new_id() -> UUID:
    return uuid.uuid4()


def utc_now() -> datetime:
    return datetime.now(UTC)


def issue_token(username: str, tenant: str, scopes: list[str]) -> str:
    return jwt.encode({"sub": username, "tenant": tenant, "scopes": scopes}, SECRET_KEY, algorithm="HS256")


class TaskStatus(str, Enum):
    todo = "todo"
    doing = "doing"
    done = "done"


class ExportFormat(str, Enum):
    csv = "csv"
    pdf = "pdf"


class ReportKind(str, Enum):
    weekly = "weekly"
    yearly = "yearly"


class ProjectIn(BaseModel):
    name: str = Field(min_length=3, max_length=60)
    budget: float = Field(ge=0)
    internal_notes: str | None = None


class ProjectPatch(BaseModel):
    name: str | None = Field(default=None, min_length=3, max_length=60)
    budget: float | None = Field(default=None, ge=0)


class ProjectOut(BaseModel):
    id: UUID
    name: str
    budget: float
    created_at: datetime
    archived_at: datetime | None = None


class TaskOut(BaseModel):
    id: int
    title: str
    status: TaskStatus


class TenantSettings(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    display_name: str
    default_status: TaskStatus = TaskStatus.todo
    max_projects: int


class QuotaExceeded(Exception):
    """The app's own error type for a tenant that used up its exports for now."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"export quota used up, retry in {retry_after} s")
        self.retry_after = retry_after


class TenantError(Exception):
    """The app's own error type: the request names no tenant, or one the token is not for."""

    def __init__(self, message: str, status_code: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code


SCHEMA = """
CREATE TABLE project (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT NOT NULL, budget REAL NOT NULL,
                      internal_notes TEXT, created_at TEXT NOT NULL, UNIQUE (tenant, name));
CREATE TABLE task (id INTEGER PRIMARY KEY, project_id TEXT NOT NULL, title TEXT NOT NULL, status TEXT NOT NULL,
                   hours REAL NOT NULL);
CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL, actor TEXT NOT NULL,
                    action TEXT NOT NULL);
CREATE TABLE tenant (name TEXT PRIMARY KEY, display_name TEXT NOT NULL, max_projects INTEGER NOT NULL,
                     exports_left INTEGER NOT NULL);
CREATE TABLE export (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, format TEXT NOT NULL, requested_at TEXT NOT NULL);
"""


def init_db(path: str) -> None:
    with sqlite3.connect(path) as db:
        db.executescript(SCHEMA)
        db.executemany(
            "INSERT INTO tenant VALUES (?, ?, ?, ?)",
            [("acme", "ACME Corp", 10, 5), ("globex", "Globex", 3, 0)],
        )
        db.executemany(
            "INSERT INTO project VALUES (?, ?, ?, ?, ?, ?)",
            [
                (str(ACME_PROJECT), "acme", "Rocket skates", 12000.0, "the CEO's pet project", SEEDED_AT),
                (str(EMPTY_PROJECT), "acme", "Anvil audit", 0.0, None, SEEDED_AT),
                (str(GLOBEX_PROJECT), "globex", "Doomsday device", 1e9, "do not mention", SEEDED_AT),
            ],
        )
        db.executemany(
            "INSERT INTO task (project_id, title, status, hours) VALUES (?, ?, ?, ?)",
            [
                (str(ACME_PROJECT), "Buy wheels", "done", 3.0),
                (str(ACME_PROJECT), "Add rockets", "doing", 5.0),
                (str(ACME_PROJECT), "Test on cliff", "todo", 0.0),
                (str(GLOBEX_PROJECT), "Hollow volcano", "doing", 90.0),
            ],
        )


def get_db(request: Request) -> Iterator[sqlite3.Connection]:
    yield from connect(request, init_db)


Session = Annotated[sqlite3.Connection, Depends(get_db)]

oauth2_scheme = OAuth2PasswordBearer(
    tokenUrl="token",
    scopes={
        "projects:read": "Read projects and tasks.",
        "projects:write": "Create and change projects.",
        "admin": "Delete projects.",
    },
)


class User(BaseModel):
    username: str
    tenant: str
    scopes: list[str] = []


def get_current_user(security_scopes: SecurityScopes, token: Annotated[str, Depends(oauth2_scheme)]) -> User:
    authenticate_value = f'Bearer scope="{security_scopes.scope_str}"' if security_scopes.scopes else "Bearer"
    credentials_exception = HTTPException(
        status_code=401,
        detail="Could not validate credentials",
        headers={"WWW-Authenticate": authenticate_value},
    )
    try:
        payload = jwt.decode(token, SECRET_KEY, algorithms=["HS256"])
    except jwt.InvalidTokenError:
        raise credentials_exception
    user = User(
        username=payload.get("sub", ""), tenant=payload.get("tenant", ""), scopes=payload.get("scopes", [])
    )
    for scope in security_scopes.scopes:
        if scope not in user.scopes:
            raise HTTPException(
                status_code=401,
                detail="Not enough permissions",
                headers={"WWW-Authenticate": authenticate_value},
            )
    return user


def current_tenant(request: Request) -> str:
    """The tenant the middleware read off the request, checked against the caller's token when there is one."""
    tenant = getattr(request.state, "tenant", None)
    if not tenant:
        raise TenantError("Send the X-Tenant header")
    return tenant


Tenant = Annotated[str, Depends(current_tenant)]


def same_tenant(user: User, tenant: str) -> None:
    if user.tenant != tenant:
        raise TenantError(f"Your token is not for tenant {tenant!r}", status_code=403)


Reader = Annotated[User, Security(get_current_user, scopes=["projects:read"])]
Writer = Annotated[User, Security(get_current_user, scopes=["projects:write"])]


class Pagination:
    """A class dependency with its own query parameters, as the docs' ``CommonQueryParams``."""

    def __init__(
        self, page: Annotated[int, Query(ge=1)] = 1, size: Annotated[int, Query(ge=1, le=50)] = 20
    ) -> None:
        self.offset = (page - 1) * size
        self.limit = size


def supported_client(x_client_version: Annotated[str | None, Header()] = None) -> None:
    """App-wide: clients older than 2.0 send requests this API no longer understands."""
    if x_client_version is not None and x_client_version.split(".")[0] < "2":
        raise HTTPException(status_code=400, detail="Upgrade your client to 2.0 or later")


def record(database: str, tenant: str, actor: str, action: str) -> None:
    with sqlite3.connect(database) as db:
        db.execute("INSERT INTO audit (tenant, actor, action) VALUES (?, ?, ?)", (tenant, actor, action))


def project_row(row: sqlite3.Row) -> dict[str, Any]:
    return {**dict(row), "created_at": datetime.fromisoformat(row["created_at"])}


def create_api(exposure: Exposure = "decorator", database: str | None = None) -> FastAPI:
    expose, as_a_skill = as_tool(exposure), as_skill(exposure)
    app = FastAPI(title="Projects", dependencies=[Depends(supported_client)])
    app.state.database = database

    @app.middleware("http")
    async def tenant_from_header(request: Request, call_next: Any) -> Any:
        request.state.tenant = request.headers.get("x-tenant")
        return await call_next(request)

    @app.exception_handler(QuotaExceeded)
    async def quota_exceeded(request: Request, exc: QuotaExceeded) -> JSONResponse:
        return JSONResponse(
            status_code=429,
            content={"detail": "Export quota used up"},
            headers={"Retry-After": str(exc.retry_after)},
        )

    @app.exception_handler(TenantError)
    async def tenant_error(request: Request, exc: TenantError) -> JSONResponse:
        return JSONResponse(status_code=exc.status_code, content={"detail": exc.message})

    projects = APIRouter(prefix="/projects", tags=["projects"])

    @projects.get("", response_model=list[ProjectOut])
    @as_a_skill
    @expose
    async def list_projects(
        user: Reader, tenant: Tenant, session: Session, page: Annotated[Pagination, Depends()]
    ) -> Any:
        """The tenant's projects, newest first."""
        same_tenant(user, tenant)
        rows = session.execute(
            "SELECT * FROM project WHERE tenant = ? ORDER BY name LIMIT ? OFFSET ?",
            (tenant, page.limit, page.offset),
        ).fetchall()
        return [project_row(r) for r in rows]

    @projects.get("/{project_id}", response_model=ProjectOut, response_model_exclude={"budget"})
    @expose
    async def read_project(project_id: UUID, user: Reader, tenant: Tenant, session: Session) -> Any:
        same_tenant(user, tenant)
        row = session.execute(
            "SELECT * FROM project WHERE id = ? AND tenant = ?", (str(project_id), tenant)
        ).fetchone()
        if row is None:
            return JSONResponse(status_code=404, content={"detail": f"Project {project_id} not found"})
        return project_row(row)

    @projects.post("", status_code=201, response_model=ProjectOut)
    @as_a_skill
    @expose
    async def create_project(
        project: ProjectIn,
        user: Writer,
        tenant: Tenant,
        session: Session,
        background_tasks: BackgroundTasks,
        request: Request,
    ) -> Any:
        """Start a project."""
        same_tenant(user, tenant)
        if session.execute(
            "SELECT 1 FROM project WHERE tenant = ? AND name = ?", (tenant, project.name)
        ).fetchone():
            raise HTTPException(status_code=409, detail=f"A project named {project.name!r} exists")
        row = {
            "id": str(new_id()),
            "tenant": tenant,
            **project.model_dump(),
            "created_at": utc_now().isoformat(),
        }
        session.execute(
            "INSERT INTO project VALUES (:id, :tenant, :name, :budget, :internal_notes, :created_at)", row
        )
        session.commit()
        background_tasks.add_task(
            record, database_of(request.app, init_db), tenant, user.username, f"created {project.name}"
        )
        return {**row, "created_at": datetime.fromisoformat(row["created_at"])}

    @projects.patch("/{project_id}", response_model=ProjectOut, response_model_exclude_unset=True)
    @expose
    async def update_project(
        project_id: UUID, patch: ProjectPatch, user: Writer, tenant: Tenant, session: Session
    ) -> Any:
        """Change a project; the answer leaves out what the project never had (its archive date)."""
        same_tenant(user, tenant)
        found = session.execute(
            "SELECT 1 FROM project WHERE id = ? AND tenant = ?", (str(project_id), tenant)
        )
        if not found.fetchone():
            raise HTTPException(status_code=404, detail="Project not found")
        for column, value in patch.model_dump(exclude_unset=True).items():
            session.execute(f"UPDATE project SET {column} = ? WHERE id = ?", (value, str(project_id)))
        session.commit()
        return project_row(
            session.execute("SELECT * FROM project WHERE id = ?", (str(project_id),)).fetchone()
        )

    @projects.delete("/{project_id}", status_code=204)
    @expose
    async def delete_project(
        project_id: UUID,
        tenant: Tenant,
        session: Session,
        user: Annotated[User, Security(get_current_user, scopes=["admin"])],
    ) -> None:
        same_tenant(user, tenant)
        session.execute("DELETE FROM task WHERE project_id = ?", (str(project_id),))
        session.execute("DELETE FROM project WHERE id = ? AND tenant = ?", (str(project_id), tenant))
        session.commit()

    @projects.get("/{project_id}/tasks", response_model=list[TaskOut])
    @expose
    async def list_tasks(
        project_id: UUID, user: Reader, tenant: Tenant, session: Session, status: TaskStatus | None = None
    ) -> Any:
        same_tenant(user, tenant)
        query, args = (
            "SELECT t.* FROM task t JOIN project p ON p.id = t.project_id WHERE p.id = ? AND p.tenant = ?",
            [str(project_id), tenant],
        )
        if status is not None:
            query, args = query + " AND t.status = ?", [*args, status.value]
        return [dict(r) for r in session.execute(query + " ORDER BY t.id", args).fetchall()]

    @projects.get("/{project_id}/stats")
    @expose
    async def project_stats(
        project_id: UUID, user: Reader, tenant: Tenant, session: Session
    ) -> dict[str, Any]:
        """Hours per task and the share done (a division that fails on a project with no hours yet)."""
        same_tenant(user, tenant)
        rows = session.execute(
            "SELECT status, hours FROM task WHERE project_id = ?", (str(project_id),)
        ).fetchall()
        total = sum(r["hours"] for r in rows)
        done = sum(r["hours"] for r in rows if r["status"] == "done")
        return {"project": project_id, "as_of": utc_now(), "hours": total, "done_share": done / total}

    @projects.post("/{project_id}/exports", status_code=202)
    @expose
    async def export_project(
        project_id: UUID,
        user: Reader,
        tenant: Tenant,
        session: Session,
        format: Annotated[ExportFormat, Query()] = ExportFormat.csv,
    ) -> dict[str, Any]:
        """Queue an export of the project; each tenant has a few per day."""
        same_tenant(user, tenant)
        if session.execute("SELECT exports_left FROM tenant WHERE name = ?", (tenant,)).fetchone()[0] <= 0:
            raise QuotaExceeded(retry_after=3600)
        export = {"id": new_id(), "project_id": project_id, "format": format, "requested_at": utc_now()}
        session.execute(
            "INSERT INTO export VALUES (?, ?, ?, ?)",
            (str(export["id"]), str(project_id), format.value, export["requested_at"].isoformat()),
        )
        session.execute("UPDATE tenant SET exports_left = exports_left - 1 WHERE name = ?", (tenant,))
        session.commit()
        return {**export, "status": "queued"}

    tasks = APIRouter(prefix="/tasks", tags=["tasks"], dependencies=[Depends(current_tenant)])

    @tasks.get("/status/{status}")
    @expose
    async def tasks_by_status(
        status: Annotated[TaskStatus, Path(description="todo, doing or done")],
        user: Reader,
        request: Request,
        session: Session,
    ) -> list[str]:
        tenant = request.state.tenant
        same_tenant(user, tenant)
        rows = session.execute(
            "SELECT t.title FROM task t JOIN project p ON p.id = t.project_id "
            "WHERE p.tenant = ? AND t.status = ? ORDER BY t.id",
            (tenant, status.value),
        ).fetchall()
        return [r["title"] for r in rows]

    @app.get(
        "/settings", response_model=TenantSettings, response_model_exclude_defaults=True, tags=["settings"]
    )
    @expose
    async def read_settings(user: Reader, tenant: Tenant, session: Session) -> Any:
        same_tenant(user, tenant)
        row = session.execute("SELECT * FROM tenant WHERE name = ?", (tenant,)).fetchone()
        return {"display_name": row["display_name"], "max_projects": row["max_projects"]}

    @app.get("/reports/{kind}", tags=["reports"])
    @expose
    async def report(kind: ReportKind, user: Reader, tenant: Tenant) -> dict[str, Any]:
        same_tenant(user, tenant)
        if kind is ReportKind.yearly:
            raise HTTPException(
                status_code=503, detail="Yearly reports are being rebuilt", headers={"Retry-After": "120"}
            )
        return {"kind": kind, "tenant": tenant, "generated_at": utc_now(), "id": new_id()}

    @app.get("/legacy/projects", tags=["legacy"])
    @expose
    async def legacy_projects() -> RedirectResponse:
        """Moved to /projects."""
        return RedirectResponse("/projects", status_code=308)

    app.include_router(projects)
    app.include_router(tasks)
    return app


def build_agent(app: FastAPI, exposure: Exposure = "decorator") -> Agent:
    return attach_agent(app, "projects", exposure)


create_app, __getattr__ = app_factory(create_api, build_agent)
