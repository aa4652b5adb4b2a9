"""Users and items, shaped like the widely copied full-stack FastAPI template: a JWT login, an
``OAuth2PasswordBearer`` + ``get_current_user`` dependency, a session dependency with ``yield``, routers under
``/api/v1`` with ``dependencies=[Depends(get_current_active_superuser)]`` on the admin routes, and
``response_model=UserPublic`` on handlers annotated ``-> Any`` that return database rows (``hashed_password``
included).
"""

import hashlib
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any
from uuid import UUID

import jwt
from fastapi import APIRouter, BackgroundTasks, Depends, FastAPI, HTTPException, Request, status
from fastapi.security import OAuth2PasswordBearer, OAuth2PasswordRequestForm
from pydantic import BaseModel, EmailStr, Field

from agentmw import Agent

from ._exposure import Exposure, app_factory, as_skill, as_tool, attach_agent, connect, database_of

__all__ = [
    "ADMIN_ID",
    "ALICE_ID",
    "ALICE_ITEM",
    "BOB_ID",
    "BOB_ITEM",
    "PASSWORDS",
    "app",  # noqa: F822 - built on first access by the module's __getattr__ (app_factory)
    "build_agent",
    "create_api",
    "create_app",
    "init_db",
    "new_id",
]

SECRET_KEY = "changethis-in-production-please-0123456789"
ALGORITHM = "HS256"
API_V1 = "/api/v1"

ADMIN_ID = UUID("00000000-0000-4000-8000-000000000001")
ALICE_ID = UUID("00000000-0000-4000-8000-000000000002")
BOB_ID = UUID("00000000-0000-4000-8000-000000000003")
INACTIVE_ID = UUID("00000000-0000-4000-8000-000000000004")
ALICE_ITEM = UUID("00000000-0000-4000-8000-0000000000a1")
BOB_ITEM = UUID("00000000-0000-4000-8000-0000000000b1")
PASSWORDS = {
    "admin@example.com": "admin-password",
    "alice@example.com": "alice-password",
    "bob@example.com": "bob-password",
    "old@example.com": "old-password",
}


def new_id() -> UUID:
    return uuid.uuid4()


def get_password_hash(password: str, email: str) -> str:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), email.encode(), 1000).hex()


def create_access_token(subject: str, expires_delta: timedelta = timedelta(minutes=30)) -> str:
    expire = datetime.now(UTC) + expires_delta
    return jwt.encode({"exp": expire, "sub": subject}, SECRET_KEY, algorithm=ALGORITHM)


# --- models --------------------------------------------------------------------------------------------


class UserBase(BaseModel):
    email: EmailStr
    is_active: bool = True
    is_superuser: bool = False
    full_name: str | None = Field(default=None, max_length=255)


class UserCreate(UserBase):
    password: str = Field(min_length=8, max_length=40)


class UserUpdateMe(BaseModel):
    full_name: str | None = Field(default=None, max_length=255)
    email: EmailStr | None = None


class UserPublic(UserBase):
    id: UUID


class UsersPublic(BaseModel):
    data: list[UserPublic]
    count: int


class ItemBase(BaseModel):
    title: str = Field(min_length=1, max_length=255)
    description: str | None = Field(default=None, max_length=255)


class ItemCreate(ItemBase):
    pass


class ItemUpdate(BaseModel):
    title: str | None = Field(default=None, min_length=1, max_length=255)
    description: str | None = Field(default=None, max_length=255)


class ItemPublic(ItemBase):
    id: UUID
    owner_id: UUID


class ItemsPublic(BaseModel):
    data: list[ItemPublic]
    count: int


class Message(BaseModel):
    message: str


class Token(BaseModel):
    access_token: str
    token_type: str = "bearer"


# --- the database --------------------------------------------------------------------------------------

SCHEMA = """
CREATE TABLE user (id TEXT PRIMARY KEY, email TEXT UNIQUE NOT NULL, hashed_password TEXT NOT NULL,
                   full_name TEXT, is_active INTEGER NOT NULL, is_superuser INTEGER NOT NULL);
CREATE TABLE item (id TEXT PRIMARY KEY, title TEXT NOT NULL, description TEXT, owner_id TEXT NOT NULL
                   REFERENCES user(id) ON DELETE CASCADE);
CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, email_to TEXT NOT NULL, subject TEXT NOT NULL);
"""


def init_db(path: str) -> None:
    """Create the tables and the first users and items (as the template's ``initial_data.py`` does)."""
    with sqlite3.connect(path) as db:
        db.executescript(SCHEMA)
        for user_id, email, name, active, superuser in [
            (ADMIN_ID, "admin@example.com", "Ada Admin", 1, 1),
            (ALICE_ID, "alice@example.com", "Alice", 1, 0),
            (BOB_ID, "bob@example.com", "Bob", 1, 0),
            (INACTIVE_ID, "old@example.com", None, 0, 0),
        ]:
            db.execute(
                "INSERT INTO user VALUES (?, ?, ?, ?, ?, ?)",
                (str(user_id), email, get_password_hash(PASSWORDS[email], email), name, active, superuser),
            )
        db.execute(
            "INSERT INTO item VALUES (?, 'Alice''s laptop', 'a 14-inch one', ?)",
            (str(ALICE_ITEM), str(ALICE_ID)),
        )
        db.execute("INSERT INTO item VALUES (?, 'Bob''s bike', NULL, ?)", (str(BOB_ITEM), str(BOB_ID)))


def get_db(request: Request) -> Iterator[sqlite3.Connection]:
    yield from connect(request, init_db)


SessionDep = Annotated[sqlite3.Connection, Depends(get_db)]


def user_row(row: sqlite3.Row | None) -> dict[str, Any] | None:
    if row is None:
        return None
    user = dict(row)
    user["is_active"], user["is_superuser"] = bool(user["is_active"]), bool(user["is_superuser"])
    return user


# --- auth ----------------------------------------------------------------------------------------------

reusable_oauth2 = OAuth2PasswordBearer(tokenUrl=f"{API_V1}/login/access-token")
TokenDep = Annotated[str, Depends(reusable_oauth2)]


def get_current_user(session: SessionDep, token: TokenDep) -> dict[str, Any]:
    try:
        payload = jwt.decode(token, SECRET_KEY, algorithms=[ALGORITHM])
    except jwt.InvalidTokenError:
        raise HTTPException(status_code=status.HTTP_403_FORBIDDEN, detail="Could not validate credentials")
    user = user_row(session.execute("SELECT * FROM user WHERE id = ?", (payload.get("sub"),)).fetchone())
    if not user:
        raise HTTPException(status_code=404, detail="User not found")
    if not user["is_active"]:
        raise HTTPException(status_code=400, detail="Inactive user")
    return user


CurrentUser = Annotated[dict, Depends(get_current_user)]


def get_current_active_superuser(current_user: CurrentUser) -> dict[str, Any]:
    if not current_user["is_superuser"]:
        raise HTTPException(status_code=403, detail="The user doesn't have enough privileges")
    return current_user


def send_email(database: str, email_to: str, subject: str) -> None:
    """What the template does with emails, minus SMTP: the message lands in the outbox table."""
    with sqlite3.connect(database) as db:
        db.execute("INSERT INTO outbox (email_to, subject) VALUES (?, ?)", (email_to, subject))


# --- the app -------------------------------------------------------------------------------------------


def create_api(exposure: Exposure = "decorator", database: str | None = None) -> FastAPI:
    expose = as_tool(exposure)
    app = FastAPI(title="Full Stack FastAPI Project", openapi_url=f"{API_V1}/openapi.json")
    app.state.database = database

    login = APIRouter(tags=["login"])

    @login.post("/login/access-token")
    def login_access_token(
        session: SessionDep, form_data: Annotated[OAuth2PasswordRequestForm, Depends()]
    ) -> Token:
        """OAuth2 compatible token login, get an access token for future requests."""
        user = user_row(
            session.execute("SELECT * FROM user WHERE email = ?", (form_data.username,)).fetchone()
        )
        if not user or get_password_hash(form_data.password, user["email"]) != user["hashed_password"]:
            raise HTTPException(status_code=400, detail="Incorrect email or password")
        if not user["is_active"]:
            raise HTTPException(status_code=400, detail="Inactive user")
        return Token(access_token=create_access_token(user["id"]))

    users = APIRouter(prefix="/users", tags=["users"])

    @users.get("/", dependencies=[Depends(get_current_active_superuser)], response_model=UsersPublic)
    @expose
    def read_users(session: SessionDep, skip: int = 0, limit: int = 100) -> Any:
        """Retrieve users."""
        count = session.execute("SELECT count(*) FROM user").fetchone()[0]
        rows = session.execute("SELECT * FROM user ORDER BY email LIMIT ? OFFSET ?", (limit, skip)).fetchall()
        return {"data": [user_row(r) for r in rows], "count": count}

    @users.post("/", dependencies=[Depends(get_current_active_superuser)], response_model=UserPublic)
    @expose
    def create_user(*, session: SessionDep, user_in: UserCreate) -> Any:
        """Create new user."""
        if session.execute("SELECT 1 FROM user WHERE email = ?", (user_in.email,)).fetchone():
            raise HTTPException(
                status_code=400, detail="The user with this email already exists in the system."
            )
        user_id = str(new_id())
        session.execute(
            "INSERT INTO user VALUES (?, ?, ?, ?, ?, ?)",
            (
                user_id,
                user_in.email,
                get_password_hash(user_in.password, user_in.email),
                user_in.full_name,
                int(user_in.is_active),
                int(user_in.is_superuser),
            ),
        )
        session.commit()
        return user_row(session.execute("SELECT * FROM user WHERE id = ?", (user_id,)).fetchone())

    @users.get("/me", response_model=UserPublic)
    @expose
    def read_user_me(current_user: CurrentUser) -> Any:
        """Get current user."""
        return current_user

    @users.patch("/me", response_model=UserPublic)
    @expose
    def update_user_me(*, session: SessionDep, user_in: UserUpdateMe, current_user: CurrentUser) -> Any:
        """Update own user."""
        if user_in.email:
            existing = session.execute("SELECT id FROM user WHERE email = ?", (user_in.email,)).fetchone()
            if existing and existing["id"] != current_user["id"]:
                raise HTTPException(status_code=409, detail="User with this email already exists")
        changes = user_in.model_dump(exclude_unset=True)
        for column, value in changes.items():
            session.execute(f"UPDATE user SET {column} = ? WHERE id = ?", (value, current_user["id"]))
        session.commit()
        return user_row(session.execute("SELECT * FROM user WHERE id = ?", (current_user["id"],)).fetchone())

    @users.get("/{user_id}", response_model=UserPublic)
    @expose
    def read_user_by_id(user_id: uuid.UUID, session: SessionDep, current_user: CurrentUser) -> Any:
        """Get a specific user by id."""
        user = user_row(session.execute("SELECT * FROM user WHERE id = ?", (str(user_id),)).fetchone())
        if user and user["id"] == current_user["id"]:
            return user
        if not current_user["is_superuser"]:
            raise HTTPException(status_code=403, detail="The user doesn't have enough privileges")
        if user is None:
            raise HTTPException(status_code=404, detail="User not found")
        return user

    @users.delete("/{user_id}", dependencies=[Depends(get_current_active_superuser)])
    @expose
    def delete_user(session: SessionDep, current_user: CurrentUser, user_id: uuid.UUID) -> Message:
        """Delete a user."""
        if not session.execute("SELECT 1 FROM user WHERE id = ?", (str(user_id),)).fetchone():
            raise HTTPException(status_code=404, detail="User not found")
        if str(user_id) == current_user["id"]:
            raise HTTPException(status_code=403, detail="Super users are not allowed to delete themselves")
        session.execute("DELETE FROM item WHERE owner_id = ?", (str(user_id),))
        session.execute("DELETE FROM user WHERE id = ?", (str(user_id),))
        session.commit()
        return Message(message="User deleted successfully")

    items = APIRouter(prefix="/items", tags=["items"])

    @items.get("/", response_model=ItemsPublic)
    @expose
    def read_items(session: SessionDep, current_user: CurrentUser, skip: int = 0, limit: int = 100) -> Any:
        """Retrieve items."""
        where, args = (
            ("", ()) if current_user["is_superuser"] else ("WHERE owner_id = ?", (current_user["id"],))
        )
        count = session.execute(f"SELECT count(*) FROM item {where}", args).fetchone()[0]
        rows = session.execute(
            f"SELECT * FROM item {where} ORDER BY title LIMIT ? OFFSET ?", (*args, limit, skip)
        ).fetchall()
        return {"data": [dict(r) for r in rows], "count": count}

    @items.get("/{id}", response_model=ItemPublic)
    @expose
    def read_item(session: SessionDep, current_user: CurrentUser, id: uuid.UUID) -> Any:
        """Get item by ID."""
        item = session.execute("SELECT * FROM item WHERE id = ?", (str(id),)).fetchone()
        if not item:
            raise HTTPException(status_code=404, detail="Item not found")
        if not current_user["is_superuser"] and item["owner_id"] != current_user["id"]:
            raise HTTPException(status_code=400, detail="Not enough permissions")
        return dict(item)

    @items.post("/", response_model=ItemPublic)
    @as_skill(exposure)
    @expose
    def create_item(*, session: SessionDep, current_user: CurrentUser, item_in: ItemCreate) -> Any:
        """Create new item."""
        item_id = str(new_id())
        session.execute(
            "INSERT INTO item VALUES (?, ?, ?, ?)",
            (item_id, item_in.title, item_in.description, current_user["id"]),
        )
        session.commit()
        return dict(session.execute("SELECT * FROM item WHERE id = ?", (item_id,)).fetchone())

    @items.put("/{id}", response_model=ItemPublic)
    @expose
    def update_item(
        *, session: SessionDep, current_user: CurrentUser, id: uuid.UUID, item_in: ItemUpdate
    ) -> Any:
        """Update an item."""
        item = session.execute("SELECT * FROM item WHERE id = ?", (str(id),)).fetchone()
        if not item:
            raise HTTPException(status_code=404, detail="Item not found")
        if not current_user["is_superuser"] and item["owner_id"] != current_user["id"]:
            raise HTTPException(status_code=400, detail="Not enough permissions")
        for column, value in item_in.model_dump(exclude_unset=True).items():
            session.execute(f"UPDATE item SET {column} = ? WHERE id = ?", (value, str(id)))
        session.commit()
        return dict(session.execute("SELECT * FROM item WHERE id = ?", (str(id),)).fetchone())

    @items.delete("/{id}")
    @expose
    def delete_item(session: SessionDep, current_user: CurrentUser, id: uuid.UUID) -> Message:
        """Delete an item."""
        item = session.execute("SELECT * FROM item WHERE id = ?", (str(id),)).fetchone()
        if not item:
            raise HTTPException(status_code=404, detail="Item not found")
        if not current_user["is_superuser"] and item["owner_id"] != current_user["id"]:
            raise HTTPException(status_code=400, detail="Not enough permissions")
        session.execute("DELETE FROM item WHERE id = ?", (str(id),))
        session.commit()
        return Message(message="Item deleted successfully")

    utils = APIRouter(prefix="/utils", tags=["utils"])

    @utils.post("/test-email/", dependencies=[Depends(get_current_active_superuser)], status_code=201)
    @expose
    def test_email(email_to: EmailStr, background_tasks: BackgroundTasks, request: Request) -> Message:
        """Test emails."""
        background_tasks.add_task(send_email, database_of(request.app, init_db), email_to, "Test email")
        return Message(message="Test email sent")

    @utils.get("/health-check/")
    @expose
    async def health_check() -> bool:
        return True

    api_router = APIRouter()
    api_router.include_router(login)
    api_router.include_router(users)
    api_router.include_router(items)
    api_router.include_router(utils)
    app.include_router(api_router, prefix=API_V1)
    return app


def build_agent(app: FastAPI, exposure: Exposure = "decorator") -> Agent:
    return attach_agent(app, "fullstack", exposure, exclude=(f"{API_V1}/login/*",))


create_app, __getattr__ = app_factory(create_api, build_agent)
