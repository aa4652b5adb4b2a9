"""The protected agent the auth tests drive: a small procurement service whose routes keep their FastAPI
``Security(...)`` dependencies, served with ``Agent(auth=ProtectedResource(...))``.

- ``search_assets``: read-only, needs no scope beyond the server's ``mcp``;
- ``department_budget``: needs ``assets:read``; ``submit_purchase_request``: needs ``purchases:write`` and its
  route's own ``Security`` dependency (which answers 403 for a user whose role is not ``buyer``);
- ``set_budget``: an admin-only skill (role ``admin``, scope ``budget:admin``): hidden from everyone else;
- ``quota_probe``: rate-limited to 2 calls a minute per caller;
- ``budget://{department}``: a resource for admins; ``escalation_note``: a prompt for admins.
"""

from typing import Annotated

from fastapi import FastAPI, HTTPException, Security
from fastapi.security import OAuth2AuthorizationCodeBearer, SecurityScopes

from agentmw import Agent, AgentMiddleware, prompt, resource, skill, tool
from agentmw.a2a import A2ASettings
from agentmw.auth import JWTVerifier, Principal, ProtectedResource, RateLimit, current_principal

BUDGETS = {"engineering": 50_000.0, "design": 20_000.0}


def build(
    issuer: str,
    *,
    store: str = "memory://",
    rate_limits: tuple[RateLimit, ...] = (),
    anonymous: bool = False,
    verifier: object = None,
    a2a: A2ASettings | None = None,
) -> FastAPI:
    app = FastAPI()
    oauth2 = OAuth2AuthorizationCodeBearer(
        authorizationUrl=f"{issuer}/authorize",
        tokenUrl=f"{issuer}/token",
        scopes={"purchases:write": "submit purchase requests"},
    )

    def buyer(
        security: SecurityScopes,
        token: Annotated[str, Security(oauth2)],
        principal: Annotated[Principal | None, Security(current_principal)],
    ) -> Principal:
        """The app's own check, as it was before agentmw: a bearer token, and the buyer role."""
        if principal is None:
            raise HTTPException(401, "Not authenticated", headers={"WWW-Authenticate": "Bearer"})
        if "buyer" not in principal.roles:
            raise HTTPException(403, "Only buyers may submit purchase requests")
        return principal

    @app.get("/assets")
    @tool(read_only=True)
    async def search_assets(query: str = "") -> list[str]:
        """Search the asset catalog."""
        return [name for name in ("laptop", "monitor", "dock") if query in name]

    @app.get("/budgets/{department}")
    @tool(read_only=True, scopes=["assets:read"])
    async def department_budget(department: str) -> float:
        """A department's budget."""
        return BUDGETS.get(department, 0.0)

    @app.post("/purchase-requests")
    @tool(scopes=["purchases:write"])
    async def submit_purchase_request(
        sku: str, user: Annotated[Principal, Security(buyer, scopes=["purchases:write"])]
    ) -> str:
        """Submit a purchase request."""
        return f"{user.subject} requested {sku}"

    @skill(roles=["admin"], scopes=["budget:admin"])
    async def set_budget(department: str, amount: float) -> str:
        """Set a department's budget.

        Summary:
            Changes a department's budget (admins only).
        """
        BUDGETS[department] = amount
        return f"{department}: {amount:g}"

    @skill
    async def chat(text: str) -> str:
        """Answer a question.

        Summary:
            Answers questions about purchasing.
        """
        return f"You said: {text}"

    @tool(rate_limit=RateLimit(2, per=60))
    async def quota_probe() -> str:
        """A tool with a small quota."""
        return "ok"

    @resource("budget://{department}", roles=["admin"])
    async def budget_resource(department: str) -> str:
        """A department's budget, for admins."""
        return str(BUDGETS.get(department, 0.0))

    @prompt(roles=["admin"])
    def escalation_note(department: str) -> str:
        """Draft an escalation note."""
        return f"Escalate the {department} budget."

    auth = ProtectedResource(
        authorization_servers=[issuer],
        verifier=verifier or JWTVerifier(issuer=issuer, refetch_seconds=0.5),
        scopes=["mcp"],
        anonymous=anonymous,
        resource_name="procurement (test)",
    )
    agent = Agent(
        "procurement",
        include=[app, set_budget, chat, quota_probe, budget_resource, escalation_note],
        auth=auth,
        store=store,
        rate_limits=rate_limits,
        a2a=a2a or A2ASettings(extended_card=lambda who: {"description": f"Procurement, as {who} sees it"}),
    )
    app.add_middleware(AgentMiddleware, agent=agent)
    app.state.agent = agent
    return app
