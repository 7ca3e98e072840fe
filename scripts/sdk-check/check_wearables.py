"""Drives every wearable-data endpoint through the official Python SDK (PyPI `vital`, pinned in requirements.txt)
and checks that each response parses into the SDK's own models, as a migrating customer's code would.

Environment:
  HB_BASE_URL    our server, e.g. http://127.0.0.1:3000
  HB_API_KEY     a team API key
  HB_USER_ID     the user (its demo connection is made here and deregistered at the end)
  HB_PROVIDER    optional demo provider to connect (default oura)
  HB_START_DATE  optional, default 30 days ago (YYYY-MM-DD or ISO date-time)
  HB_END_DATE    optional, default today
  HB_WORKOUT_ID  optional workout for the stream call; default the first workout of workouts.get
  HB_PULL_WAIT   optional seconds to wait for the historical pull to settle (default 60)

Prints `OK <call>` or `FAIL <call>: <error>` per call and exits 1 if any call failed. A call whose prerequisite
failed is reported as FAIL too (nothing passes silently). user.deregister_provider runs last.
"""
import datetime as dt
import json
import os
import sys
import time

from vital.core.api_error import ApiError
from vital.core.pydantic_utilities import parse_obj_as
from vital.types import (
    ClientActivityResponse,
    ClientBodyResponse,
    ClientFacingProviderDetailed,
    ClientFacingBloodOxygenTimeseries,
    ClientFacingGlucoseTimeseries,
    ClientFacingHeartRateTimeseries,
    ClientFacingHrvTimeseries,
    ClientFacingMealResponse,
    ClientFacingProfile,
    ClientFacingStepsTimeseries,
    ClientFacingStream,
    ClientSleepResponse,
    ClientWorkoutResponse,
    DemoConnectionStatus,
    GroupedHeartRateResponse,
    LinkTokenExchangeResponse,
    ProviderLinkResponse,
    Source,
    SourceLink,
    UserHistoricalPullsResponse,
    UserRefreshErrorResponse,
    UserRefreshSuccessResponse,
    UserResourcesResponse,
    UserSignInTokenResponse,
    UserSuccessResponse,
)

from sdkcheck import check, client, expect_that, finish, need

# ---------- setup ----------

USER_ID = os.environ.get("HB_USER_ID")
if not USER_ID:
    sys.exit("set HB_USER_ID")
PROVIDER = os.environ.get("HB_PROVIDER") or "oura"
TODAY = dt.datetime.now(dt.timezone.utc).date()
START_DATE = os.environ.get("HB_START_DATE") or (TODAY - dt.timedelta(days=30)).isoformat()
END_DATE = os.environ.get("HB_END_DATE") or TODAY.isoformat()
WORKOUT_ID = os.environ.get("HB_WORKOUT_ID")
PULL_WAIT = float(os.environ.get("HB_PULL_WAIT") or 60)


def expect_list_of(value, model, what):
    expect_that(isinstance(value, list), f"{what}: not a list but {type(value).__name__}")
    expect_that(all(isinstance(item, model) for item in value), f"{what}: items are not {model.__name__}")
    return value


def connected_slugs():
    providers = client.user.get_connected_providers(USER_ID)
    expect_that(isinstance(providers, dict), f"not a dict: {type(providers).__name__}")
    return {p.slug for p in providers.get("providers", [])}


range_args = {"start_date": START_DATE, "end_date": END_DATE}

# ---------- link ----------

check("link.token", lambda: client.link.token(user_id=USER_ID), LinkTokenExchangeResponse)
check(
    "link.token (all fields)",
    lambda: client.link.token(
        user_id=USER_ID,
        provider=PROVIDER,
        redirect_url="https://example.com/callback",
        filter_on_providers=[PROVIDER],
        on_error="redirect",
        on_close="redirect",
    ),
    LinkTokenExchangeResponse,
)


def link_token_api():
    """The link page's API (x-vital-link-token, no API key): providers, state, an OAuth URL, a refused sign-in."""
    token = client.link.token(user_id=USER_ID).link_token
    providers = check("link.get_all_providers", lambda: client.link.get_all_providers(vital_link_token=token), list)
    expect_that(providers and all(isinstance(p, SourceLink) for p in providers), f"not SourceLink items: {providers!r}"[:300])
    check("link.token_state", lambda: client.link.token_state(vital_link_token=token), dict)
    source = check("link.generate_oauth_link", lambda: client.link.generate_oauth_link("wahoo", vital_link_token=token), Source)
    expect_that(source and source.oauth_url.startswith("https://"), f"no oauth_url: {source!r}"[:300])
    refused = check(
        "link.connect_password_provider (wrong password)",
        lambda: client.link.connect_password_provider("peloton", username="demo", password="not-the-demo-password", vital_link_token=token),
        ProviderLinkResponse,
    )
    expect_that(refused and refused.state == "error" and not refused.connected, f"not refused: {refused!r}"[:300])
    return token


check("link-token API", link_token_api)


def provider_catalogue():
    """GET /v2/providers with our extra fields (integration, deprecated, replaced_by) beside the SDK's own."""
    listed = expect_list_of(client.providers.get_all(), ClientFacingProviderDetailed, "providers.get_all")
    by_slug = {p.slug: p for p in listed}
    expect_that({"whoop", "whoop_v2", "dexcom", "dexcom_v3"} <= set(by_slug), f"twins missing: {sorted(by_slug)}"[:300])
    # The model allows extra fields: ours arrive beside its own.
    twin = by_slug["whoop"]
    expect_that(getattr(twin, "deprecated", None) is True and getattr(twin, "replaced_by", None) == "whoop_v2", f"whoop not marked deprecated: {twin!r}"[:300])
    return listed


check("providers.get_all", provider_catalogue, list)


def sign_in_token():
    answer = client.user.get_user_sign_in_token(USER_ID)
    expect_that(answer.user_id == USER_ID and answer.sign_in_token.startswith("hbsi_"), f"not a sign-in token of the user: {answer!r}"[:300])
    return answer


check("user.get_user_sign_in_token", sign_in_token, UserSignInTokenResponse)


def connect_demo():
    try:
        return client.link.connect_demo_provider(user_id=USER_ID, provider=PROVIDER)
    except ApiError as err:
        # The caller may have connected this provider already: a 400 is fine if its body is a parsed JSON error.
        if err.status_code == 400 and isinstance(err.body, dict) and isinstance(err.body.get("detail"), (str, dict)):
            print(f"   (already connected: {json.dumps(err.body)[:200]})", flush=True)
            return DemoConnectionStatus(success=True, detail=str(err.body["detail"]))
        raise


check("link.connect_demo_provider", connect_demo, DemoConnectionStatus)


def connected_providers():
    providers = client.user.get_connected_providers(USER_ID)
    expect_that(isinstance(providers, dict) and "providers" in providers, f"no `providers` key: {providers!r}"[:300])
    slugs = [p.slug for p in providers["providers"]]
    expect_that(PROVIDER in slugs, f"{PROVIDER} not among the connected providers {slugs}")
    return providers


check("user.get_connected_providers", connected_providers, dict)


def refresh():
    try:
        return client.user.refresh(USER_ID, timeout=5)
    except ApiError as err:
        # 400 is the documented refusal (e.g. 8 refreshes per hour); its body must parse as UserRefreshErrorResponse.
        if err.status_code == 400 and isinstance(err.body, dict):
            refused = parse_obj_as(UserRefreshErrorResponse, err.body)
            print(f"   (refresh refused: {refused.error})", flush=True)
            return UserRefreshSuccessResponse(
                success=refused.success, user_id=refused.user_id, refreshed_sources=[], in_progress_sources=[],
                failed_sources=list(refused.failed_sources or []),
            )
        raise


check("user.refresh", refresh, UserRefreshSuccessResponse)

# ---------- introspection ----------


def settled_pulls():
    """Polls until the provider's pulls exist and none is scheduled, in progress or retrying (or HB_PULL_WAIT passes)."""
    deadline = time.time() + PULL_WAIT
    while True:
        answer = client.introspect.get_user_historical_pulls(user_id=USER_ID, provider=PROVIDER)
        expect_that(isinstance(answer, UserHistoricalPullsResponse), "not a UserHistoricalPullsResponse")
        pending = [
            f"{slug}/{resource}:{stats.status.value}"
            for user in answer.data
            for slug, pulls in user.provider.items()
            for resource, stats in pulls.pulled.items()
            if stats.status.value in ("scheduled", "in_progress", "retrying")
        ]
        # Nothing listed yet: the connection's workflow has not scheduled its pulls; keep waiting.
        started = any(pulls.pulled for user in answer.data for pulls in user.provider.values())
        if (started and not pending) or time.time() > deadline:
            if pending:
                print(f"   (still pending after {PULL_WAIT:.0f}s: {', '.join(pending[:10])})", flush=True)
            return answer
        time.sleep(1)


check("introspect.get_user_historical_pulls", settled_pulls, UserHistoricalPullsResponse)
check(
    "introspect.get_user_historical_pulls (paged)",
    lambda: client.introspect.get_user_historical_pulls(user_limit=1),
    UserHistoricalPullsResponse,
)
check(
    "introspect.get_user_resources",
    lambda: client.introspect.get_user_resources(user_id=USER_ID, provider=PROVIDER, user_limit=10),
    UserResourcesResponse,
)

# ---------- summaries ----------

check("activity.get", lambda: client.activity.get(USER_ID, **range_args), ClientActivityResponse)
check("activity.get (provider)", lambda: client.activity.get(USER_ID, start_date=START_DATE, provider=PROVIDER), ClientActivityResponse)
check("sleep.get", lambda: client.sleep.get(USER_ID, **range_args), ClientSleepResponse)
workouts = check("workouts.get", lambda: client.workouts.get(USER_ID, **range_args), ClientWorkoutResponse)
check("body.get", lambda: client.body.get(USER_ID, **range_args), ClientBodyResponse)
check("profile.get", lambda: client.profile.get(USER_ID), ClientFacingProfile)
check("meal.get", lambda: client.meal.get(USER_ID, **range_args), ClientFacingMealResponse)

# ---------- timeseries ----------

FLAT_TIMESERIES = {
    "heartrate": ClientFacingHeartRateTimeseries,
    "steps": ClientFacingStepsTimeseries,
    "glucose": ClientFacingGlucoseTimeseries,
    "hrv": ClientFacingHrvTimeseries,
    "blood_oxygen": ClientFacingBloodOxygenTimeseries,
}
for resource, model in FLAT_TIMESERIES.items():
    method = getattr(client.vitals, resource)
    check(f"vitals.{resource}", lambda method=method, model=model, resource=resource: expect_list_of(
        method(USER_ID, **range_args), model, resource), list)


def grouped_heartrate():
    first = client.vitals.heartrate_grouped(USER_ID, **range_args)
    expect_that(isinstance(first, GroupedHeartRateResponse), "not a GroupedHeartRateResponse")
    if first.next_cursor:
        second = client.vitals.heartrate_grouped(USER_ID, next_cursor=first.next_cursor, **range_args)
        expect_that(isinstance(second, GroupedHeartRateResponse), "page 2 is not a GroupedHeartRateResponse")
    return first


check("vitals.heartrate_grouped", grouped_heartrate, GroupedHeartRateResponse)


def workout_stream():
    workout_id = WORKOUT_ID
    if not workout_id:
        found = need(workouts, "the workouts list").workouts
        expect_that(found, f"no workouts between {START_DATE} and {END_DATE} (set HB_WORKOUT_ID)")
        workout_id = found[0].id
    return client.workouts.get_by_workout_id(workout_id)


check("workouts.get_by_workout_id (stream)", workout_stream, ClientFacingStream)



def connect_manual():
    # A phone's provider, connected as the SDK does (a second connect is a 409 the SDK tolerates).
    try:
        answer = client.link.connect_manual_provider("health_connect", user_id=USER_ID)
        expect_that(answer == {"success": True}, f"not {{'success': True}}: {answer!r}"[:300])
    except ApiError as err:
        # Connected by the run before (the checks run once per way of building the client).
        expect_that(err.status_code == 409, f"neither connected nor already connected: {err!r}"[:300])
        answer = {"success": True}
    expect_that("health_connect" in connected_slugs(), "health_connect is not among the connected providers")
    try:
        client.link.connect_manual_provider("health_connect", user_id=USER_ID)
        expect_that(False, "a second connect was not refused")
    except ApiError as err:
        expect_that(err.status_code == 409 and isinstance(err.body, dict) and isinstance(err.body.get("detail"), str), f"not a 409 with a detail: {err!r}"[:300])
    return answer


check("link.connect_manual_provider", connect_manual, dict)

# ---------- last: deregister ----------


def deregister():
    answer = client.user.deregister_provider(USER_ID, PROVIDER)
    expect_that(isinstance(answer, UserSuccessResponse), "not a UserSuccessResponse")
    expect_that(PROVIDER not in connected_slugs(), f"{PROVIDER} is still connected after deregistering")
    return answer


check("user.deregister_provider", deregister, UserSuccessResponse)

finish()
