"""`agentmw executions` never prints a store password, in any form a URL carries one (found by a review)."""

from __future__ import annotations

import pytest

from agentmw.cli import main

SECRET = "s3cretpw"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://u@127.0.0.1:1/db?password={SECRET}",  # libpq's own query parameter
        f"redis://127.0.0.1:1/0?password={SECRET}",  # redis-py's query parameter
        f"redis://:{SECRET}@[::1/0",  # a malformed URL
    ],
)
def test_no_password_in_cli_errors(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["executions", "list", "--store", url]) != 0
    err = capsys.readouterr()
    assert SECRET not in err.err + err.out, err.err


def test_an_option_the_store_client_refuses_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    # redis-py turns unknown query options into keyword arguments its connection refuses (a TypeError)
    assert main(["executions", "list", "--store", "rediss://127.0.0.1:1/0?foo=bar"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agentmw: ") and "Traceback" not in err and err.count("\n") == 1, err
