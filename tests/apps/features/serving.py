"""What wraps a route: middleware, background tasks, the ``Request``, sub-applications, ``root_path``, sync and
async handlers; and a file upload, which agents are refused (``upload_app``, not in the differential)."""

import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import BackgroundTasks, Depends, FastAPI, File, Request, Response, UploadFile
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.middleware.trustedhost import TrustedHostMiddleware

from .._exposure import Exposure, as_skill, as_tool
from ..differential import Case, Route
from . import effects_of, feature

__all__ = ["upload_app"]


@feature(
    "middleware-state",
    [
        (Route("GET", "/tenant/", "read_tenant", skill=True), [Case("tenant", "tenant"), Case("none")]),
        (Route("GET", "/timed/", "read_timed"), [Case("timed")]),
    ],
)
def middleware_state(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.middleware("http")
    async def add_tenant_and_process_time(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        request.state.tenant = request.headers.get("x-tenant", "public")
        start_time = time.perf_counter()
        response = await call_next(request)
        response.headers["X-Process-Time"] = str(time.perf_counter() - start_time)
        return response

    @app.get("/tenant/")
    @as_skill(exposure)
    @expose
    async def read_tenant(request: Request) -> dict[str, str]:
        return {"tenant": request.state.tenant}

    @app.get("/timed/")
    @expose
    def read_timed() -> dict[str, str]:
        return {"timed": "yes"}

    return app


@feature(
    "middleware-trusted-host",
    [
        (Route("GET", "/", "main"), [Case("local"), Case("another-name", "localhost")]),
    ],
)
def middleware_trusted_host(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1"])

    @app.get("/")
    @expose
    async def main() -> dict[str, str]:
        return {"message": "Hello World"}

    return app


@feature(
    "middleware-gzip",
    [
        (Route("GET", "/large/", "read_large"), [Case("large")]),
    ],
)
def middleware_gzip(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)
    app.add_middleware(GZipMiddleware, minimum_size=10, compresslevel=5)

    @app.get("/large/")
    @expose
    async def read_large() -> dict[str, Any]:
        return {"lines": [f"line {i} of a long answer" for i in range(50)]}

    return app


@feature(
    "background-tasks",
    [
        (
            Route("POST", "/send-notification/{email}", "send_notification", skill=True),
            [
                Case("sent", path={"email": "a@example.com"}),
                Case("with-q", path={"email": "b@example.com"}, query={"q": "hello"}),
            ],
        ),
    ],
)
def background_tasks(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    def write_log(effects: list[Any], message: str) -> None:
        effects.append(message)

    def get_query(request: Request, background_tasks: BackgroundTasks, q: str | None = None) -> str | None:
        if q:
            background_tasks.add_task(write_log, effects_of(request), f"found query: {q}")
        return q

    @app.post("/send-notification/{email}")
    @as_skill(exposure)
    @expose
    async def send_notification(
        email: str,
        request: Request,
        background_tasks: BackgroundTasks,
        q: Annotated[str | None, Depends(get_query)],
    ) -> dict[str, str]:
        background_tasks.add_task(write_log, effects_of(request), f"message to {email}")
        return {"message": "Message sent"}

    return app


@feature(
    "request-object",
    [
        (Route("GET", "/items/{item_id}", "read_root"), [Case("item", path={"item_id": "foo"})]),
    ],
)
def request_object(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    @app.get("/items/{item_id}")
    @expose
    def read_root(item_id: str, request: Request) -> dict[str, Any]:
        client_host = request.client.host if request.client else None
        return {
            "client_host": client_host,
            "item_id": item_id,
            "path": request.url.path,
            "query": str(request.url.query),
            "method": request.method,
        }

    return app


@feature(
    "sub-application",
    [
        (Route("GET", "/app", "read_main"), [Case("main")]),
        (Route("GET", "/subapi/sub", "read_sub"), [Case("sub")]),
    ],
)
def sub_application(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)
    subapi = FastAPI()

    @app.get("/app")
    @expose
    def read_main() -> dict[str, str]:
        return {"message": "Hello World from main app"}

    @subapi.get("/sub")
    @expose
    def read_sub(request: Request) -> dict[str, str]:
        return {"message": "Hello World from sub API", "root_path": request.scope.get("root_path", "")}

    app.mount("/subapi", subapi)
    return app


@feature(
    "root-path",
    [
        (Route("GET", "/app", "read_main"), [Case("main")]),
    ],
)
def root_path(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(root_path="/api/v1"), as_tool(exposure)

    @app.get("/app")
    @expose
    def read_main(request: Request) -> dict[str, str]:
        return {
            "message": "Hello World",
            "root_path": request.scope.get("root_path", ""),
            "url": str(request.url_for("read_main")),
        }

    return app


@feature(
    "sync-and-async",
    [
        (
            Route("GET", "/sync/{n}", "read_sync"),
            [Case("three", path={"n": 3}), Case("bad", path={"n": "x"})],
        ),
        (Route("GET", "/async/{n}", "read_async"), [Case("three", path={"n": 3})]),
        (Route("GET", "/mixed/", "read_mixed"), [Case("mixed", query={"n": 2})]),
    ],
)
def sync_and_async(exposure: Exposure) -> FastAPI:
    app, expose = FastAPI(), as_tool(exposure)

    def sync_dependency(n: int = 1) -> int:
        return n * 10

    async def async_dependency(base: Annotated[int, Depends(sync_dependency)]) -> int:
        return base + 1

    @app.get("/sync/{n}")
    @expose
    def read_sync(n: int) -> dict[str, int]:
        return {"square": n * n}

    @app.get("/async/{n}")
    @expose
    async def read_async(n: int) -> dict[str, int]:
        return {"cube": n**3}

    @app.get("/mixed/")
    @expose
    def read_mixed(value: Annotated[int, Depends(async_dependency)]) -> dict[str, int]:
        return {"value": value}

    return app


def upload_app(exposure: Exposure) -> FastAPI:
    """FastAPI's "request files" example: agents cannot send a file, so agentmw refuses the route at start."""
    app, expose = FastAPI(), as_tool(exposure)

    @app.post("/files/")
    @expose
    async def create_file(file: Annotated[bytes, File()]) -> dict[str, int]:
        return {"file_size": len(file)}

    @app.post("/uploadfile/")
    @expose
    async def create_upload_file(file: UploadFile) -> dict[str, str | None]:
        return {"filename": file.filename}

    @app.get("/status/")
    @expose
    def read_status() -> dict[str, str]:
        return {"status": "ok"}

    return app
