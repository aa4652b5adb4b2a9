"""The pure parts of agentmw.auth, without a server: claims, challenges, policies, rate limits, the key cache."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from agentmw import Agent, tool
from agentmw.auth import JWTVerifier, MisdirectedRequest, Principal, ProtectedResource, RateLimit
from agentmw.auth.access import policy_of, rate_key
from agentmw.auth.principal import scopes_of_claims
from agentmw.auth.ratelimit import Limiter
from agentmw.auth.verifiers import InvalidToken, VerifierUnavailable
from agentmw.identity import Unauthenticated
from agentmw.state import open_state
from tests.auth.server import AuthServer


def test_claims_become_a_principal() -> None:
    p = Principal.from_claims(
        {
            "sub": "alice",
            "scope": "mcp assets:read",
            "realm_access": {"roles": ["admin"]},
            "client_id": "c1",
            "exp": 1,
        },
        roles_claim="realm_access.roles",
    )
    assert (p.subject, p.scopes, p.roles, p.client_id, p.expires_at) == (
        "alice",
        frozenset({"mcp", "assets:read"}),
        frozenset({"admin"}),
        "c1",
        1.0,
    )
    assert Principal.from_claims({"sub": "bob", "scp": ["a", "b"]}).scopes == frozenset({"a", "b"})
    assert Principal.from_claims({"sub": "bob", "roles": "x y"}).roles == frozenset({"x", "y"})
    assert p.is_authenticated and p.identity == "alice" and p.missing(frozenset({"mcp", "z"})) == {"z"}


def _resource(**kwargs: object) -> ProtectedResource:
    kwargs.setdefault("verifier", lambda t, r: None)
    resource = ProtectedResource(authorization_servers=["https://as.example"], scopes=["mcp"], **kwargs)  # type: ignore[arg-type]
    Agent("t", auth=resource, allowed_hosts=["api.example", "h"])
    return resource


def test_the_resource_and_its_metadata_url_follow_the_mount() -> None:
    resource = _resource()
    scope = {"scheme": "https", "headers": [(b"host", b"api.example")], "root_path": "/agent"}
    assert resource.resource_url(scope) == "https://api.example/agent/mcp"
    assert (
        resource.metadata_url(scope) == "https://api.example/.well-known/oauth-protected-resource/agent/mcp"
    )
    fixed = _resource(resource="https://public.example/mcp/")
    assert fixed.resource_url(scope) == "https://public.example/mcp"  # forwarded or not, the configured one
    foreign = {**scope, "headers": [(b"host", b"evil.example")]}
    with pytest.raises(MisdirectedRequest):  # never an audience: a token for evil.example must not pass here
        resource.resource_url(foreign)
    with pytest.raises(MisdirectedRequest):
        resource.challenge(foreign)
    assert fixed.resource_url(foreign) == "https://public.example/mcp"  # the audience does not depend on Host


def test_the_challenge_quotes_its_values() -> None:
    resource = _resource()
    scope = {"scheme": "http", "headers": [(b"host", b"h")], "root_path": ""}
    assert (
        resource.challenge(scope)
        == 'Bearer resource_metadata="http://h/.well-known/oauth-protected-resource/mcp", scope="mcp"'
    )
    odd = resource.challenge(scope, error="invalid_token", description='bad "token"\\\n', scopes=["b", "mcp"])
    assert odd.endswith('scope="mcp b", error="invalid_token", error_description="bad \\"token\\"\\\\"')


def test_policies() -> None:
    assert policy_of() is None
    with pytest.raises(TypeError):
        policy_of(scopes="orders:write")  # type: ignore[arg-type]
    policy = policy_of(["b", "a", "b"], ["admin"], RateLimit(1))
    assert policy is not None and policy.scope_list == ("b", "a") and policy.roles == {"admin"}
    with pytest.raises(ValueError):
        RateLimit(0)


def test_no_auth_means_no_gatekeeper() -> None:
    @tool
    def plain() -> str:
        """Nothing asked."""
        return "x"

    agent = Agent("plain", include=[plain])
    assert agent.access is None and agent.tools["plain"].policy is None  # the hot path checks one None

    @tool(scopes=["s"])
    def scoped() -> str:
        """A scope asked."""
        return "x"

    agent.include(scoped)
    assert agent.access is not None and agent.access.resource is None


def test_identify_and_auth_are_exclusive() -> None:
    with pytest.raises(ValueError, match="decides who the caller is"):
        Agent("x", identify=lambda c: "me", auth=_resource())


@pytest.mark.parametrize("algorithm", ["window", "bucket"])
async def test_rate_limits_count_exactly_under_contention(algorithm: str, tmp_path) -> None:
    state = open_state(f"sqlite:///{tmp_path / 'rl.db'}")
    other = open_state(f"sqlite:///{tmp_path / 'rl.db'}")  # a second replica on the same store
    limit = RateLimit(5, per=60, algorithm=algorithm)  # type: ignore[arg-type]
    one, two = Limiter(lambda: state), Limiter(lambda: other)
    results = await asyncio.gather(*[(one if i % 2 else two).take(limit, "alice") for i in range(12)])
    assert sum(r is None for r in results) == 5
    waits = [r for r in results if r is not None]
    assert all(0 < w <= 60 for w in waits)
    assert await one.take(limit, "bob") is None  # per key
    await state.close()
    await other.close()


async def test_a_burst_wider_than_any_retry_count_gets_exactly_the_limit(tmp_path) -> None:
    """64 takes at once on one key from two replicas: each compare-and-set round has one winner, so the last
    winner needs dozens of rounds; none of the first 30 may be refused as "contended"."""
    state = open_state(f"sqlite:///{tmp_path / 'rl.db'}")
    other = open_state(f"sqlite:///{tmp_path / 'rl.db'}")
    limit = RateLimit(30, per=3600)
    one, two = Limiter(lambda: state), Limiter(lambda: other)
    results = await asyncio.gather(*[(one if i % 2 else two).take(limit, "alice") for i in range(64)])
    assert sum(r is None for r in results) == 30
    refused = [r for r in results if r is not None]
    assert all(r > 1.0 for r in refused)  # refused by the window, not as contended
    await state.close()
    await other.close()


async def test_a_bucket_refills() -> None:
    state = open_state("memory://")
    limiter = Limiter(lambda: state)
    limit = RateLimit(2, per=0.2, algorithm="bucket")
    assert [await limiter.take(limit, "k") for _ in range(2)] == [None, None]
    wait = await limiter.take(limit, "k")
    assert wait is not None and 0 < wait <= 0.1
    await asyncio.sleep(wait + 0.01)
    assert await limiter.take(limit, "k") is None


async def test_the_key_cache_refetches_unknown_keys_at_most_once_per_period() -> None:
    server = AuthServer("http://as.test")
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=server.app), base_url="http://as.test")
    verifier = JWTVerifier(issuer="http://as.test", http=http, refetch_seconds=60)
    good = server.issue(audience="http://rs/mcp")
    assert (await verifier.verify(good, "http://rs/mcp")).subject == "alice"  # discovery, then one fetch
    assert server.jwks_fetches == 1
    forged = server.issue(audience="http://rs/mcp").split(".")
    import base64
    import json

    header = json.loads(base64.urlsafe_b64decode(forged[0] + "=="))
    header["kid"] = "made-up"
    forged[0] = base64.urlsafe_b64encode(json.dumps(header).encode()).decode().rstrip("=")
    for _ in range(3):
        with pytest.raises(InvalidToken, match="a key the issuer does not publish"):
            await verifier.verify(".".join(forged), "http://rs/mcp")
    assert server.jwks_fetches == 1  # made-up key ids do not turn requests into fetches
    with pytest.raises(InvalidToken, match="algorithm 'HS256' is not accepted"):
        import jwt

        await verifier.verify(jwt.encode({"sub": "x"}, "k" * 32, algorithm="HS256"), "http://rs/mcp")
    await http.aclose()


async def test_a_mounted_agent_serves_its_metadata_where_rfc_9728_puts_it() -> None:
    from starlette.applications import Starlette

    resource = ProtectedResource(
        authorization_servers=["https://as.example"],
        verifier=lambda t, r: None,
        resource="http://api.test/agent/mcp",
    )
    agent = Agent("mounted", auth=resource, allowed_hosts=["api.test"])
    app = Starlette()
    app.mount("/agent", agent.asgi())
    app.add_route("/.well-known/oauth-protected-resource/agent/mcp", agent.asgi())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api.test") as http:
        document = (await http.get("/.well-known/oauth-protected-resource/agent/mcp")).json()
        assert document["resource"] == "http://api.test/agent/mcp"
        refused = await http.post(
            "/agent/mcp", json={}, headers={"accept": "application/json, text/event-stream"}
        )
        assert refused.status_code == 401
        assert (
            'resource_metadata="http://api.test/.well-known/oauth-protected-resource/agent/mcp"'
            in refused.headers["www-authenticate"]
        )


# --- the review's findings, as units --------------------------------------------------------------------------


def test_scopes_and_roles_split_on_the_space_character_only() -> None:
    """RFC 6749 section 3.3: scope tokens are separated by a space; other whitespace is part of a token."""
    assert scopes_of_claims({"scope": "  mcp  x\x1fassets:read\tb\u2003c "}) == {
        "mcp",
        "x\x1fassets:read\tb\u2003c",
    }
    assert scopes_of_claims({"scp": ["a", "", "b"]}) == {"a", "b"}
    assert Principal.from_claims({"sub": "bob", "roles": "admin\x1fbuyer  ops"}).roles == {
        "admin\x1fbuyer",
        "ops",
    }


@pytest.mark.parametrize(
    "claims", [{"scope": "mcp"}, {"sub": "", "scope": "mcp"}, {"sub": "", "client_id": ""}]
)
async def test_a_token_naming_no_caller_is_refused(claims: dict) -> None:
    resource = _resource(verifier=lambda token, where: claims)
    with pytest.raises(Unauthenticated, match="names no subject"):
        await resource.authenticate(
            {"scheme": "http", "headers": [(b"host", b"h"), (b"authorization", b"Bearer t")]}
        )
    mapped = _resource(verifier=lambda token, where: {"sub": "alice"}, identity=lambda principal: "")
    with pytest.raises(Unauthenticated, match="names no subject"):  # an identity= mapping to nothing, too
        await mapped.authenticate(
            {"scheme": "http", "headers": [(b"host", b"h"), (b"authorization", b"Bearer t")]}
        )
    client = _resource(verifier=lambda token, where: {"client_id": "svc", "scope": "mcp"})
    found = await client.authenticate(
        {"scheme": "http", "headers": [(b"host", b"h"), (b"authorization", b"Bearer t")]}
    )
    assert found is not None and found.identity == "svc"  # a client credentials token is its client


def test_rate_limits_count_unverified_credentials_by_address() -> None:
    scope = {"client": ("10.1.2.3", 5000)}
    assert (
        rate_key("credential:0123abcd", scope)
        == rate_key("anonymous", scope)
        == rate_key(None, scope)
        == "anonymous@10.1.2.3"
    )
    assert rate_key("alice", scope) == "alice"  # a verified identity (or the app's identify hook): itself
    assert rate_key("user:bob", scope) == "user:bob"  # a host-authenticated user


class _KeySet:
    """An issuer whose key set fails, is empty, or is slow, counting the requests it gets per path."""

    def __init__(self, status: int = 503, keys: list | None = None, delay: float = 0.0) -> None:
        self.status, self.keys, self.delay = status, keys or [], delay
        self.hits: dict[str, int] = {}

    def client(self) -> httpx.AsyncClient:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def endpoint(request: Request) -> JSONResponse:
            path = request.url.path
            self.hits[path] = self.hits.get(path, 0) + 1
            await asyncio.sleep(self.delay)
            if path == "/.well-known/oauth-authorization-server":
                return JSONResponse({"issuer": "http://as.test", "jwks_uri": "http://as.test/keys"})
            return JSONResponse({"keys": self.keys}, status_code=self.status)

        app = Starlette(routes=[Route("/{path:path}", endpoint)])
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://as.test")


def _token(kid: str = "k1") -> str:
    import base64
    import json

    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256', 'kid': kid, 'typ': 'at+jwt'})}.{part({'sub': 'alice'})}.c2ln"


@pytest.mark.parametrize("answer", ["failing", "empty"])
async def test_a_key_set_that_cannot_be_had_is_remembered_and_answered_503(answer: str) -> None:
    issuer = (
        _KeySet(status=503)
        if answer == "failing"
        else _KeySet(status=200, keys=[{"kty": "RSA", "use": "enc"}])
    )
    async with issuer.client() as http:
        verifier = JWTVerifier(issuer="http://as.test", http=http, refetch_seconds=30)
        for _ in range(5):
            with pytest.raises(VerifierUnavailable) as caught:
                await verifier.verify(_token(), "http://rs/mcp")
            assert 1 <= caught.value.retry_after <= 30
        assert issuer.hits == {"/.well-known/oauth-authorization-server": 1, "/keys": 1}


async def test_requests_waiting_for_a_failing_fetch_take_its_outcome() -> None:
    issuer = _KeySet(status=503, delay=0.05)
    async with issuer.client() as http:
        verifier = JWTVerifier(issuer="http://as.test", http=http, refetch_seconds=30)
        results = await asyncio.gather(
            *(verifier.verify(_token(), "http://rs/mcp") for _ in range(8)), return_exceptions=True
        )
    assert all(isinstance(r, VerifierUnavailable) for r in results), results
    assert issuer.hits["/keys"] == 1  # one fetch for eight requests, not one each in turn under the lock


async def test_the_discovered_key_set_address_is_kept() -> None:
    server = AuthServer("http://as.test")
    counted = {"metadata": 0}

    async def count(request: httpx.Request) -> None:
        counted["metadata"] += request.url.path.startswith("/.well-known/oauth-authorization-server")

    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=server.app),
        base_url="http://as.test",
        event_hooks={"request": [count]},
    )
    verifier = JWTVerifier(issuer="http://as.test", http=http, refetch_seconds=0)
    good = server.issue(audience="http://rs/mcp")
    await verifier.verify(good, "http://rs/mcp")
    server.rotate()  # a new key id: the set is fetched again, from the address found the first time
    await verifier.verify(server.issue(audience="http://rs/mcp"), "http://rs/mcp")
    assert server.jwks_fetches == 2 and counted["metadata"] == 1
    await http.aclose()
