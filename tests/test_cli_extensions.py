"""``agentmw lint`` and ``inspect`` for MCP Apps, MCP skill packages and A2UI (AMW013-AMW017): each rule tripped by
a small app or folder in tests/cli_apps/, a clean app that trips none, the real command as a subprocess."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentmw.cli import main
from agentmw.cli.lint import (
    EXTENSION_RULES,
    RETIRED,
    RULES,
    _allows,
    _loads,
    _origin,
    lint_agent,
    lint_skill_package,
)
from agentmw.cli.report import build_report, render_text
from agentmw.cli.target import resolve
from agentmw.skill_packages import MAX_SKILL_FILES
from tests.cli_apps import apps_bad, bad_app

ROOT = Path(__file__).resolve().parent.parent
BAD = "tests.cli_apps.apps_bad:app"
CLEAN = "tests.cli_apps.apps_clean:app"
DEMO = "tests.cli_apps.demo_app:app"
EXAMPLE = "examples.fastapi_app.main:app"
FOLDERS = Path("tests", "cli_apps", "skill_folders")
PACKAGES = Path("tests", "cli_apps", "skill_packages")


def agentmw(*argv: str) -> subprocess.CompletedProcess[str]:
    """The installed console script, as CI runs it."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "agentmw"), *argv],
        cwd=ROOT,
        env={**os.environ, "AGENTMW_STORE": "memory://"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def _in_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # finding sources are relative to the working directory


# --- lint ----------------------------------------------------------------------------------------------


def test_every_code_is_tripped_by_an_app_or_a_folder() -> None:
    folder_codes = {f.code for f in lint_skill_package(FOLDERS)}
    app_codes = {code for code, _, _ in apps_bad.EXPECTED}
    assert app_codes | folder_codes == EXTENSION_RULES
    assert {code for code, _, _ in bad_app.EXPECTED} | EXTENSION_RULES == set(RULES)
    assert not RETIRED & set(RULES)  # a retired code is never given again


def test_the_bad_shop_trips_each_rule_once_in_the_subprocess() -> None:
    done = agentmw("lint", BAD, "--json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert {(f["code"], f["level"], f["name"]) for f in report["findings"]} == apps_bad.EXPECTED
    for finding in report["findings"]:
        assert finding["message"] and finding["fix"] and finding["source"], finding
    by_code: dict[str, list[dict[str, str]]] = {}
    for finding in report["findings"]:
        by_code.setdefault(finding["code"], []).append(finding)
    [missing] = by_code["AMW013"]
    assert missing["source"].startswith(os.path.join("tests", "cli_apps", "apps_bad.py") + ":")
    assert "'ui://shop/order.html', which this agent does not serve" in missing["message"]
    loads = {f["message"].split(" (")[0]: f["level"] for f in by_code["AMW014"]}
    assert loads == {
        "loads 'https://unpkg.com/@modelcontextprotocol/ext-apps@2/dist/app.js'": "error",
        "loads 'cart.css'": "error",
        "seems to reach 'https://prices.shop.example/v1/today'": "warning",
    }
    declared = os.path.join("tests", "cli_apps", "apps_bad.py") + ":30"  # where ui_resource(...) is written
    assert all(f["source"] == declared for f in by_code["AMW014"])  # and the logo's origin is declared: fine
    links = sorted(f["source"] for f in by_code["AMW016"])
    skill_md = os.path.join("tests", "cli_apps", "skill_packages", "stale-links") + "/SKILL.md"
    assert links == [f"{skill_md}:8", f"{skill_md}:9"]
    assert report["errors"] == 3 and report["warnings"] == 5
    text = agentmw("lint", BAD)
    assert text.returncode == 1
    assert (
        "tests/cli_apps/apps_bad.py:49: AMW013 error: tool show_order names the UI 'ui://shop/order.html'"
        in text.stdout
    )
    assert "AMW017 warning: skill checkout_summary sends A2UI surfaces (ctx.surface)" in text.stdout
    assert '    fix: @skill(output_modes=("text/plain", "application/json+a2ui"))' in text.stdout
    assert text.stdout.rstrip().endswith("3 errors, 5 warnings in shop (tests.cli_apps.apps_bad:app)")


def test_the_clean_shop_the_demo_and_the_example_lint_clean() -> None:
    for target in (CLEAN, DEMO, EXAMPLE):
        done = agentmw("lint", target, "--strict")
        assert done.returncode == 0 and done.stdout.startswith("0 errors, 0 warnings"), done.stdout


def test_ignoring_an_extension_rule_for_one_capability(capsys) -> None:
    code, out, _ = run(capsys, "lint", BAD, "--json", "--ignore", "AMW017:price_chart", "--ignore", "AMW014")
    found = {(f["code"], f["name"]) for f in json.loads(out)["findings"]}
    assert ("AMW017", "checkout_summary") in found and ("AMW017", "price_chart") not in found
    assert not any(c == "AMW014" for c, _ in found) and code == 1


def test_skill_package_folders_as_served() -> None:
    findings = lint_skill_package(FOLDERS)  # a folder of packages: each subfolder is one
    found = {(f.code, f.level, f.name): f for f in findings}
    assert set(found) == {
        ("AMW015", "error", "no-skill-md"),
        ("AMW015", "error", "wrong-name"),
        ("AMW015", "error", "bad-frontmatter"),
    }  # fine-package has nothing
    assert found[("AMW015", "error", "no-skill-md")].message == (
        "cannot be served: no SKILL.md at its root (every skill package needs one)"
    )
    assert "the frontmatter's name 'right-name' must equal the folder's name 'wrong-name'" in (
        found[("AMW015", "error", "wrong-name")].message
    )
    assert "line 3: 'description': YAML reads 'yes'" in found[("AMW015", "error", "bad-frontmatter")].message
    assert found[("AMW015", "error", "wrong-name")].source == str(FOLDERS / "wrong-name")
    assert lint_skill_package(PACKAGES / "checkout-help") == []  # its links (a file, a folder) resolve
    assert lint_skill_package(FOLDERS / "fine-package") == []
    assert {f.name for f in lint_skill_package(PACKAGES)} == {"stale-links"}
    with pytest.raises(ValueError, match="is not a folder"):
        lint_skill_package(PACKAGES / "nowhere")


def test_a_package_over_the_file_limit(tmp_path: Path) -> None:
    package = tmp_path / "many-files"
    (package / "pages").mkdir(parents=True)
    (package / "SKILL.md").write_text(
        "---\nname: many-files\ndescription: Too many pages.\n---\n\nRead on.\n"
    )
    for n in range(MAX_SKILL_FILES):  # with SKILL.md, one past the limit
        (package / "pages" / f"{n}.md").write_text(f"page {n}\n")
    [finding] = lint_skill_package(package)
    assert (finding.code, finding.level, finding.name) == ("AMW015", "error", "many-files")
    assert f"more than {MAX_SKILL_FILES} files" in finding.message


def test_lint_skill_package_on_the_command_line() -> None:
    done = agentmw("lint", "--skill-package", str(FOLDERS), "--skill-package", str(PACKAGES / "stale-links"))
    assert done.returncode == 1, done.stderr
    assert "AMW015 error: skill package folder no-skill-md cannot be served: no SKILL.md" in done.stdout
    assert done.stdout.rstrip().endswith(
        "3 errors, 2 warnings in " + f"{FOLDERS}, {PACKAGES / 'stale-links'}"
    )
    both = agentmw("lint", DEMO, "--json", "--skill-package", str(PACKAGES / "stale-links"))
    report = json.loads(both.stdout)
    assert report["target"] == DEMO and {f["code"] for f in report["findings"]} == {"AMW016"}
    assert both.returncode == 0  # warnings only
    refused = agentmw("lint", "--skill-package", "tests/cli_apps/nowhere")
    assert refused.returncode == 2 and "is not a folder" in refused.stderr


# --- what the rules read -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        ('<script src="https://cdn.example.com/a.js"></script>', [("resourceDomains", True)]),
        ('<link rel="stylesheet" href="//fonts.example.com/f.css">', [("resourceDomains", True)]),
        ('<link rel="canonical" href="https://example.com/">', []),  # a link that loads nothing
        ('<a href="https://example.com/">x</a><form action="https://example.com/f"></form>', []),
        ('<img src="data:image/png;base64,AAAA"><img src="logo.png">', [("resourceDomains", True)]),
        (
            '<img srcset="https://i.example.com/1x.png 1x, https://i.example.com/2x.png 2x">',
            [("resourceDomains", True)] * 2,
        ),
        ('<iframe src="https://maps.example.com/embed"></iframe>', [("frameDomains", True)]),
        ('<base href="https://static.example.com/">', [("baseUriDomains", True)]),
        ("<style>@import 'https://fonts.example.com/x.css';</style>", [("resourceDomains", True)]),
        ('<div style="background: url(https://img.example.com/bg.png)"></div>', [("resourceDomains", True)]),
        (
            '<script type="module">import "./local.js"; import React from "react";</script>',
            [("resourceDomains", True)],
        ),
        (
            "<script>fetch('https://api.example.com/x'); fetch('/relative')</script>",
            [("connectDomains", False)],
        ),
        ('<script>new WebSocket("wss://ws.example.com/s")</script>', [("connectDomains", False)]),
        ("<script>fetch(`https://${host}/x`)</script>", []),  # not one origin: nothing to say
        ("<p>import x from 'https://example.com/x.js' is only text here</p>", []),
    ],
)
def test_what_a_ui_document_loads(html: str, expected: list[tuple[str, bool]]) -> None:
    assert [(load.field, load.certain) for load in _loads(html)] == expected


def test_csp_sources_match_as_browsers_match_them() -> None:
    assert _origin("https://API.example.com:8443/x?y") == "https://api.example.com:8443"
    assert _origin("//cdn.example.com/a.js") == "https://cdn.example.com"
    assert _origin("app.css") is None and _origin("/app.css") is None
    assert _allows("https://api.example.com", "https://api.example.com")
    assert _allows("https://api.example.com", "wss://api.example.com")  # a scheme allows its secure upgrade
    assert _allows("http://api.example.com", "https://api.example.com")
    assert not _allows("https://api.example.com", "http://api.example.com")
    assert _allows("https://*.example.com", "https://a.b.example.com")
    assert not _allows("https://*.example.com", "https://example.com")
    assert not _allows("https://*.example.com", "https://badexample.com")
    assert not _allows("https://api.example.com", "https://api.example.com:8443")  # no port: the default only
    assert _allows("wss://events.example.com:*", "wss://events.example.com:8443")
    assert _allows("wss://events.example.com:8443", "wss://events.example.com:8443")


def test_direct_calls_see_what_the_command_sees() -> None:
    target = resolve(BAD)
    direct = {(f.code, f.level, f.name) for f in lint_agent(target.agent, host=target.host)}
    assert direct == apps_bad.EXPECTED


# --- inspect -------------------------------------------------------------------------------------------


def test_inspect_json_shows_uis_packages_and_a2ui() -> None:
    done = agentmw("inspect", CLEAN, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["mcpExtensions"] == {
        "io.modelcontextprotocol/ui": {},
        "io.modelcontextprotocol/skills": {"directoryRead": True},
    }
    caps = {c["name"]: c for c in report["capabilities"]}
    assert caps["show_cart"]["ui"] == {"resourceUri": "ui://shop/cart.html", "served": True, "appOnly": False}
    assert caps["pay_cart"]["ui"] == {
        "resourceUri": "ui://shop/cart.html",
        "visibility": ["app"],
        "served": True,
        "appOnly": True,
    }
    assert caps["pay_cart"]["mcp"]["tool"]["name"] == "pay_cart"  # listed as an MCP Apps host lists it
    assert caps["show_cart"]["mcp"]["tool"]["_meta"]["ui"] == {
        "resourceUri": "ui://shop/cart.html"
    }  # as listed
    page = caps["cart-page"]
    assert page["ui"] == {
        "mimeType": "text/html;profile=mcp-app",
        "csp": {
            "connectDomains": ["wss://events.shop.example"],
            "resourceDomains": ["https://unpkg.com", "https://*.img.shop.example"],
        },
        "permissions": {"clipboardWrite": {}},
        "prefersBorder": False,
        "tools": ["show_cart", "pay_cart"],
    }
    assert page["mcp"]["resource"]["mimeType"] == "text/html;profile=mcp-app"
    assert "ui" not in caps["price_chart"] and "a2ui" not in caps["price_chart"]
    assert caps["checkout_summary"]["a2ui"] == {"outputMode": True, "sendsSurfaces": True}
    assert report["a2ui"]["extension"]["uri"] == "https://a2ui.org/a2a-extension/a2ui/v0.9"
    assert report["a2ui"]["skills"] == [
        {"name": "checkout_summary", "outputMode": True, "sendsSurfaces": True}
    ]
    packages = {p["name"]: p for p in report["skillPackages"]}
    help_ = packages["checkout-help"]
    skill_md = (ROOT / PACKAGES / "checkout-help" / "SKILL.md").read_bytes()
    assert help_["skillMdDigest"] == "sha256:" + hashlib.sha256(skill_md).hexdigest()
    assert [f["path"] for f in help_["files"]] == ["SKILL.md", "reference/payments.md"]
    assert (
        help_["size"]
        == sum(f["size"] for f in help_["files"])
        == len(skill_md) + len((ROOT / PACKAGES / "checkout-help" / "reference" / "payments.md").read_bytes())
    )
    assert (
        help_["source"] == str(PACKAGES / "checkout-help")
        and help_["uri"] == "skill://checkout-help/SKILL.md"
    )
    assert help_["access"] == {"scopes": [], "roles": ["shopper"]} and help_["listed"] is False  # role-only
    gift = packages["gift-wrap"]
    assert gift["source"] is None and gift["listed"] is True and gift["access"] is None
    assert caps["checkout-help"]["exposure"] == "skillPackage"
    assert caps["gift-wrap"]["source"] == "(built in code)"


def test_inspect_text_shows_uis_packages_and_a2ui() -> None:
    done = agentmw("inspect", CLEAN)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert (
        '  MCP extensions: io.modelcontextprotocol/ui {}, io.modelcontextprotocol/skills {"directoryRead": true}\n'
        "  A2A extensions: https://a2ui.org/a2a-extension/a2ui/v0.9\n"
    ) in out
    assert (
        "  MCP App UI: ui://shop/cart.html (visibility: app); app-only: only MCP Apps hosts list it\n" in out
    )
    assert (
        "  MCP App document: text/html;profile=mcp-app\n"
        "    csp: connectDomains wss://events.shop.example; resourceDomains https://unpkg.com "
        "https://*.img.shop.example\n"
        "    permissions: clipboardWrite\n"
        "    border: no\n"
        "    UI of tools: show_cart, pay_cart\n"
    ) in out
    assert "  A2UI: sends surfaces (ctx.surface); output mode declared\n" in out
    assert (
        "skill packages (MCP skills/list, skills/get):\n  checkout-help  skill://checkout-help/SKILL.md"
        in out
    )
    assert "    files: SKILL.md, reference/payments.md\n    access: role shopper; not listed" in out
    bad = agentmw("inspect", BAD).stdout
    assert "  MCP App UI: ui://shop/order.html  NOT SERVED (lint AMW013)\n" in bad
    assert "  A2UI: sends surfaces (ctx.surface); output mode NOT declared (lint AMW017)\n" in bad


def test_an_app_without_the_features_shows_what_it_showed() -> None:
    report = asyncio.run(build_report(resolve(DEMO)))
    assert report["mcpExtensions"] == {} and report["skillPackages"] == [] and report["a2ui"] is None
    for cap in report["capabilities"]:
        assert set(cap) <= {
            "name",
            "function",
            "source",
            "kinds",
            "exposure",
            "route",
            "mcp",
            "a2a",
            "agui",
            "policy",
        }, cap
    text = render_text(report)
    assert "MCP App" not in text and "extensions" not in text and "skill packages" not in text


def test_inspect_shows_the_examples_ui_package_and_surface() -> None:
    report = json.loads(agentmw("inspect", EXAMPLE, "--json").stdout)
    caps = {c["name"]: c for c in report["capabilities"]}
    assert caps["submit_purchase_request"]["ui"]["resourceUri"] == "ui://procurement/approval.html"
    assert caps["submit_purchase_request"]["ui"]["served"] is True
    assert caps["approval-card"]["source"] == os.path.join("examples", "fastapi_app", "apps", "approval.html")
    assert "submit_purchase_request" in caps["approval-card"]["ui"]["tools"]
    assert [p["name"] for p in report["skillPackages"]] == ["purchase-requests"]
    assert caps["procurement_assistant"]["a2ui"] == {"outputMode": True, "sendsSurfaces": True}


def test_rules_on_agents_built_in_a_test() -> None:
    from agentmw import Agent, SkillPackage, resource, tool

    @resource("ui://shop/receipts/{number}.html")
    def receipt(number: str) -> str:
        """A receipt as a card."""
        return f"<p>Receipt {number}</p>"

    @tool(read_only=True, open_world=False, ui="ui://shop/receipts/latest.html")  # a template serves it
    async def last_receipt() -> str:
        """Show the last receipt.

        Summary:
            Answers "what did I pay?".
        """
        return "12.50 EUR"

    notes = SkillPackage(
        "returns-help",
        "Help with returns; use it when someone wants to send an item back.",
        "See [the form](forms/return.md) and [the policy](policy.md).\n",
        files={"policy.md": "30 days.\n"},
    )
    agent = Agent("shop", include=[receipt, last_receipt, notes])
    [finding] = lint_agent(agent)
    assert (finding.code, finding.level, finding.name, finding.source) == (
        "AMW016",
        "warning",
        "returns-help",
        "",  # built in code: no folder to name
    )
    assert "'forms/return.md'" in finding.message


def test_lint_runs_no_hand_written_ui_function(tmp_path: Path) -> None:
    from agentmw import Agent, resource

    called: list[str] = []

    @resource("ui://shop/live.html")
    def live() -> str:
        """The live dashboard."""
        called.append("live")  # a hand-written resource may do anything: lint must not run it
        return '<script src="https://cdn.example.com/x.js"></script>'

    assert lint_agent(Agent("shop", include=[live])) == [] and called == []


def test_a_file_name_a_uri_cannot_hold_is_reported(tmp_path: Path) -> None:
    package = tmp_path / "odd-names"
    package.mkdir()
    (package / "SKILL.md").write_text("---\nname: odd-names\ndescription: Odd names.\n---\n\nRead on.\n")
    with open(os.path.join(os.fsencode(package), b"bad\xff.md"), "wb") as file:  # legal on Linux, not UTF-8
        file.write(b"text\n")
    [finding] = lint_skill_package(package)
    assert (finding.code, finding.level, finding.name) == ("AMW015", "error", "odd-names")


def test_inspect_text_escapes_control_characters() -> None:
    from agentmw import Agent, tool

    @tool(read_only=True, open_world=False)
    async def loud() -> int:  # text from elsewhere (a peer's description, a copied package) may hold these
        """Harmless "\x1b[2J\x1b]0;pwned\x07" text.\r

        Summary:
            Says nothing.
        """
        return 1

    report = asyncio.run(build_report(resolve_agent(Agent("shop", include=[loud]))))
    text = render_text(report)
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    assert 'Harmless "\\x1b[2J\\x1b]0;pwned\\x07" text.' in text
    assert report["capabilities"][0]["mcp"]["tool"]["description"].startswith('Harmless "\x1b')  # JSON: as is


def resolve_agent(agent):
    """A Target for an agent object, as `agentmw inspect` resolves a module's one."""
    from types import ModuleType

    module = ModuleType("cli_extension_probe")
    module.agent = agent
    sys.modules[module.__name__] = module
    try:
        return resolve(f"{module.__name__}:agent")
    finally:
        del sys.modules[module.__name__]


def test_a_ui_served_with_another_type() -> None:
    # no decorator lets it happen (a ui:// resource is always text/html;profile=mcp-app); a registry changed by hand
    # or by a future import path still gets the same rule's message
    target = resolve(CLEAN)
    target.agent.resources["ui://shop/cart.html"].mime_type = "text/html"
    try:
        found = {
            (f.code, f.name): f.message
            for f in lint_agent(target.agent, host=target.host)
            if f.code == "AMW013"
        }
    finally:
        target.agent.resources["ui://shop/cart.html"].mime_type = "text/html;profile=mcp-app"
    assert set(found) == {("AMW013", "show_cart"), ("AMW013", "pay_cart")}
    assert (
        "served as 'text/html': hosts render only 'text/html;profile=mcp-app'"
        in found[("AMW013", "show_cart")]
    )
