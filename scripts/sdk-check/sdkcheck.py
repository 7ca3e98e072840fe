"""What every SDK check script shares: the client a migrating customer builds, and OK/FAIL reporting.

`from sdkcheck import ...` works because Python puts the running script's folder first on sys.path.
"""
import json
import os
import sys

from vital import Vital
from vital.core.api_error import ApiError

BASE_URL = os.environ["HB_BASE_URL"]
API_KEY = os.environ["HB_API_KEY"]

# How a migrating customer constructs the client (HB_SDK_CLIENT):
# - plain: as the SDK's docs say, our URL only; the SDK sends the key in `x-vital-api-key`, our alias of
#   x-service-api-key.
# - headers: our header added as well; the SDK still adds `x-vital-api-key: <api_key>` (it cannot be switched off),
#   with the same key.
if os.environ.get("HB_SDK_CLIENT", "headers") == "plain":
    client = Vital(api_key=API_KEY, base_url=BASE_URL, timeout=30)
else:
    client = Vital(api_key=API_KEY, base_url=BASE_URL, headers={"x-service-api-key": API_KEY}, timeout=30)

failures = []


class Skipped(Exception):
    pass


def describe(err):
    if isinstance(err, ApiError):
        return f"HTTP {err.status_code}: {err.body if isinstance(err.body, str) else json.dumps(err.body, default=str)}"
    return f"{type(err).__name__}: {err}"


def check(name, call, expect=None):
    """Runs one call; prints OK/FAIL; returns its value (None on failure)."""
    try:
        value = call()
        if expect is not None and not isinstance(value, expect):
            raise TypeError(f"parsed as {type(value).__name__}, expected {expect.__name__}")
        print(f"OK {name}", flush=True)
        return value
    except Exception as err:  # noqa: BLE001 - report every failure and keep going
        failures.append(name)
        print(f"FAIL {name}: {describe(err)[:1500]}".replace("\n", " "), flush=True)
        return None


def need(value, what):
    if value is None:
        raise Skipped(f"not run: {what} is unavailable (an earlier call failed)")
    return value


def expect_that(condition, message):
    if not condition:
        raise AssertionError(message)


def finish():
    """Prints the summary and exits 1 if any call failed."""
    print(f"{len(failures)} failed: {', '.join(failures)}" if failures else "all SDK calls parsed", flush=True)
    sys.exit(1 if failures else 0)
