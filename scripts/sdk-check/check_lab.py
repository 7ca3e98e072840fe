"""Drives every lab-testing endpoint through the official Python SDK (PyPI `vital`, pinned in requirements.txt)
and checks that each response parses into the SDK's own models, as a migrating customer's code would.

Environment:
  HB_BASE_URL   our server, e.g. http://127.0.0.1:3000
  HB_API_KEY    a team API key
  HB_FIXTURES   optional path to a JSON file with ids to use:
                {"user_id", "order_id", "completed_order_id", "lab_test_id", "scheduled_order_id", "cancellable_order_id"}
                Every id but user_id is optional: what is missing is created here (orders via the SDK, simulated
                to completion through POST /v3/order/{id}/test).
  HB_USER_ID    the user, when HB_FIXTURES is not given (or lacks user_id)
  HB_LAB_ACCOUNT_ID  optional: a lab account of the organisation with order codes for the walk-in test's lab; then
                a lab test is created through it and GET /v3/lab_tests/labs must list it. The SDK has no lab-account
                (management API) calls or model.

Prints `OK <call>` or `FAIL <call>: <error>` per call and exits 1 if any call failed. A call whose prerequisite
failed is reported as FAIL too (nothing passes silently).

Also the unregistered test kit (testkit.create_order, then testkit.register with its sample id) and the order search
(get_orders with search_input and patient_name).

SDK 2.1.569 has no method for PATCH /v3/order/{id}, POST /v3/order/{id}/redraw or GET /v3/order_transaction/{id};
those are called as `raw ...` through the SDK's own HTTP client (same headers, base URL and retries).
"""
import datetime as dt
import json
import os
import sys
import time
import uuid

from vital.core.api_error import ApiError
from vital.core.pydantic_utilities import parse_obj_as
from vital.types import (
    AoEAnswer,
    ClientFacingLab,
    ClientFacingLabTest,
    ClientFacingOrder,
    Consent,
    GetMarkersResponse,
    GetOrdersResponse,
    LabResultsMetadata,
    LabResultsRaw,
    LabTestResourcesResponse,
    OrderSetRequest,
    PatientAddressWithValidation,
    PatientDetailsWithValidation,
    PhysicianCreateRequest,
    PhysicianCreateRequestBase,
    PostOrderResponse,
    ShippingAddressWithValidation,
    SimulationFlags,
)

from sdkcheck import check, client, expect_that, finish, need

# ---------- setup ----------

fixtures = {}
if os.environ.get("HB_FIXTURES"):
    with open(os.environ["HB_FIXTURES"]) as f:
        fixtures = json.load(f)
USER_ID = fixtures.get("user_id") or os.environ.get("HB_USER_ID")
if not USER_ID:
    sys.exit("set HB_FIXTURES (with user_id) or HB_USER_ID")
# Optional: a lab account of the team's organisation (management API) whose order codes cover the walk-in test's lab.
LAB_ACCOUNT_ID = os.environ.get("HB_LAB_ACCOUNT_ID")

lab = client.lab_tests


def low_status(order):
    """`completed` of `completed.walk_in_test.completed` (events are typed by the SDK; no extra fields used)."""
    return order.events[-1].status.value.split(".")[-1] if order.events else None


def wait_for(order_id, statuses, seconds=60):
    deadline = time.time() + seconds
    while True:
        order = lab.get_order(order_id)
        if low_status(order) in statuses:
            return order
        if time.time() > deadline:
            raise TimeoutError(f"order {order_id} is {low_status(order)}, not {'/'.join(statuses)}, after {seconds}s")
        time.sleep(0.3)


def dispatched(order_id):
    """Simulations start once the order went to the lab."""
    return wait_for(order_id, {"requisition_created", "requisition_bypassed"})


def pdf(chunks):
    body = b"".join(chunks)
    expect_that(body.startswith(b"%PDF"), f"not a PDF: {body[:40]!r}")
    return body


def raw(method, path, **kwargs):
    """An endpoint the SDK has no method for, through the SDK's own HTTP client."""
    response = client._client_wrapper.httpx_client.request(path, method=method, **kwargs)
    if not 200 <= response.status_code < 300:
        raise ApiError(status_code=response.status_code, body=response.text)
    return response.json()


def transaction_id(order):
    """Our server's `order_transaction` extension (an extra field: the SDK keeps it as a plain dict)."""
    extra = getattr(order, "order_transaction", None)
    expect_that(isinstance(extra, dict) and extra.get("id"), "the order has no order_transaction.id")
    return extra["id"]


def in_days(days):
    return (dt.datetime.now(dt.timezone.utc).date() + dt.timedelta(days=days)).isoformat()


# Realistic request bodies, built with the SDK's own request types.
patient = PatientDetailsWithValidation(
    first_name="Ana",
    last_name="Smith",
    dob="1988-04-12",
    gender="female",
    phone_number="+14155552671",
    email="ana.smith@example.com",
)
address = PatientAddressWithValidation(
    receiver_name="Ana Smith",
    first_line="123 Main St",
    second_line="Apt 4",
    city="San Francisco",
    state="CA",
    zip="94105",
    country="US",
    phone_number="+14155552671",
)
physician = PhysicianCreateRequest(first_name="Gregory", last_name="House", npi="1234567893", licensed_states=["CA"])
consents = [Consent(consent_type="terms-of-use", version="1.0", time_of_consent=dt.datetime.now(dt.timezone.utc))]


def create_order(lab_test_id, **extra):
    return lab.create_order(
        user_id=USER_ID,
        patient_details=patient,
        patient_address=address,
        order_set=OrderSetRequest(lab_test_ids=[lab_test_id]),
        collection_method="walk_in_test",
        physician=physician,
        consents=consents,
        billing_type="client_bill",
        **extra,
    )


# ---------- catalogue ----------

tests = check("lab_tests.get", lambda: lab.get(), list)
check("lab_tests.get (filtered)", lambda: lab.get(status="active", collection_method="walk_in_test"), list)


def paginate():
    first = lab.get_paginated(lab_test_limit=2)
    expect_that(isinstance(first, LabTestResourcesResponse), "not a LabTestResourcesResponse")
    if first.next_cursor:
        second = lab.get_paginated(lab_test_limit=2, next_cursor=first.next_cursor)
        expect_that(not {t.id for t in first.data} & {t.id for t in second.data}, "the second page repeats the first")
    return first


check("lab_tests.get_paginated", paginate)

walk_in = None
if fixtures.get("lab_test_id"):
    walk_in = check("lab_tests.get_by_id", lambda: lab.get_by_id(fixtures["lab_test_id"]), ClientFacingLabTest)
elif tests:
    candidates = [t for t in tests if t.method.value == "walk_in_test" and t.status.value == "active"]
    walk_in = check("lab_tests.get_by_id", lambda: lab.get_by_id(need(candidates[0] if candidates else None, "an active walk-in test").id), ClientFacingLabTest)
else:
    check("lab_tests.get_by_id", lambda: need(None, "a lab test"))

markers = check("lab_tests.get_markers", lambda: lab.get_markers(page=1, size=50), GetMarkersResponse)
check("lab_tests.get_markers (lab_id)", lambda: lab.get_markers(lab_id=need(walk_in, "the lab test").lab.id), GetMarkersResponse)
check("lab_tests.get_markers_for_lab_test", lambda: lab.get_markers_for_lab_test(need(walk_in, "the lab test").id), GetMarkersResponse)


def labs():
    """Each lab parses as the SDK's ClientFacingLab; our `connection` / `lab_account_ids` extension rides along as extra fields."""
    found = lab.get_labs()
    expect_that(found and all(isinstance(x, ClientFacingLab) for x in found), "not a list of ClientFacingLab")
    for x in found:
        expect_that(getattr(x, "connection", None) in ("lab_account", "sandbox"), f"lab {x.slug} has no connection")
        expect_that(isinstance(getattr(x, "lab_account_ids", None), list), f"lab {x.slug} has no lab_account_ids")
    if LAB_ACCOUNT_ID:
        connected = [x for x in found if LAB_ACCOUNT_ID in x.lab_account_ids]
        expect_that(len(connected) == 1 and connected[0].connection == "lab_account", f"no lab lists the account {LAB_ACCOUNT_ID}")
    return found


check("lab_tests.get_labs", labs, list)


def create_lab_test():
    lab_id = need(walk_in, "the lab test").lab.id
    same_lab = [m.id for m in need(markers, "markers").markers if m.lab_id == lab_id and m.type and m.type.value == "biomarker"][:2]
    expect_that(same_lab, f"no biomarkers of lab {lab_id} on the first markers page")
    return lab.create(name=f"SDK check {uuid.uuid4().hex[:8]}", method="walk_in_test", description="Made by check_lab.py", marker_ids=same_lab, fasting=False)


created_test = check("lab_tests.create", create_lab_test, ClientFacingLabTest)


def create_lab_test_with_account():
    """A test through the organisation's lab account (HB_LAB_ACCOUNT_ID): the SDK's create has no lab_account_id
    parameter, so it goes as an additional body parameter, as a customer would send it."""
    test = lab.create(
        name=f"SDK account {uuid.uuid4().hex[:8]}",
        method="walk_in_test",
        description="Made by check_lab.py through a lab account",
        marker_ids=[m.id for m in need(walk_in, "the lab test").markers],
        request_options={"additional_body_parameters": {"lab_account_id": LAB_ACCOUNT_ID}},
    )
    expect_that(getattr(test, "lab_account_id", None) == LAB_ACCOUNT_ID, "the test does not name the lab account")
    return test


if LAB_ACCOUNT_ID:
    check("lab_tests.create (lab_account_id)", create_lab_test_with_account, ClientFacingLabTest)
check(
    "lab_tests.update_lab_test",
    lambda: lab.update_lab_test(need(created_test, "the created test").id, name=f"SDK renamed {uuid.uuid4().hex[:8]}"),
    ClientFacingLabTest,
)

# ---------- orders ----------

idempotency_key = f"sdk-check-{uuid.uuid4()}"
new_order = check(
    "lab_tests.create_order",
    lambda: create_order(need(walk_in, "the lab test").id, idempotency_key=idempotency_key),
    PostOrderResponse,
)


def replay():
    again = create_order(need(walk_in, "the lab test").id, idempotency_key=idempotency_key)
    expect_that(again.order.id == need(new_order, "the first order").order.id, "the replay created another order")
    return again


check("lab_tests.create_order (idempotent replay)", replay, PostOrderResponse)


def order_with_diagnoses():
    """ICD codes and ask-at-order-entry answers through the SDK's own parameters and AoEAnswer type."""
    test = need(walk_in, "the lab test")
    created = create_order(test.id, icd_codes=["E11.9"], aoe_answers=[AoEAnswer(marker_id=test.markers[0].id, question_id=1001, answer="Y")])
    expect_that(created.order.icd_codes == ["E11.9"], f"icd_codes: {created.order.icd_codes}")
    expect_that(getattr(created.order, "placer_number", "").startswith("HB"), "the order has no placer_number")
    return created


check("lab_tests.create_order (icd_codes, aoe_answers)", order_with_diagnoses, PostOrderResponse)

order_id = fixtures.get("order_id") or (new_order.order.id if new_order else None)
order = check("lab_tests.get_order", lambda: lab.get_order(need(order_id, "an order")), ClientFacingOrder)
check("lab_tests.get_orders", lambda: lab.get_orders(user_id=USER_ID, page=1, size=5), GetOrdersResponse)


def filtered_orders():
    since = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)
    found = lab.get_orders(order_ids=[need(order_id, "an order")], start_date=since, order_direction="desc", size=10)
    expect_that([o.id for o in found.orders] == [order_id], f"expected just {order_id}, got {[o.id for o in found.orders]}")
    return found


check("lab_tests.get_orders (filtered)", filtered_orders, GetOrdersResponse)

# Our new order walked to completion by the simulation; results are read from the fixture's completed order if given.
def simulate():
    oid = need(new_order, "the new order").order.id
    dispatched(oid)
    lab.simulate_order_process(oid, final_status="completed.walk_in_test.completed", delay=0, request=SimulationFlags(interpretation="abnormal"))
    return wait_for(oid, {"completed"})


simulated = check("lab_tests.simulate_order_process", simulate, ClientFacingOrder)
completed_id = fixtures.get("completed_order_id")
if completed_id:
    check("lab_tests.get_order (completed)", lambda: lab.get_order(completed_id), ClientFacingOrder)
else:
    completed_id = simulated.id if simulated else None

check("lab_tests.get_result_raw", lambda: lab.get_result_raw(need(completed_id, "a completed order")), LabResultsRaw)
check("lab_tests.get_result_metadata", lambda: lab.get_result_metadata(need(completed_id, "a completed order")), LabResultsMetadata)
check("lab_tests.get_result_pdf", lambda: pdf(lab.get_result_pdf(need(completed_id, "a completed order"))))
check("lab_tests.get_order_requistion_pdf", lambda: pdf(lab.get_order_requistion_pdf(need(completed_id, "a completed order"))))

# Scheduled order (activate_by): PATCH moves its date.
scheduled_id = fixtures.get("scheduled_order_id")
if not scheduled_id:
    scheduled = check(
        "lab_tests.create_order (activate_by)",
        lambda: create_order(need(walk_in, "the lab test").id, activate_by=in_days(30)),
        PostOrderResponse,
    )
    scheduled_id = scheduled.order.id if scheduled else None


def reschedule():
    oid = need(scheduled_id, "a scheduled order")
    new_date = in_days(45)
    answer = raw("PATCH", f"v3/order/{oid}", json={"activate_by": new_date})
    expect_that(answer.get("order", {}).get("id") == oid, f"unexpected answer {answer}")
    after = lab.get_order(oid)
    expect_that(after.activate_by == new_date, f"activate_by is {after.activate_by}, not {new_date}")
    return after


check("raw PATCH /v3/order/{id} (activate_by)", reschedule, ClientFacingOrder)
check("lab_tests.get_orders (scheduled)", lambda: lab.get_orders(user_id=USER_ID, order_activation_types="scheduled"), GetOrdersResponse)

cancellable_id = fixtures.get("cancellable_order_id")
if not cancellable_id:
    to_cancel = check(
        "lab_tests.create_order (to cancel)",
        lambda: create_order(need(walk_in, "the lab test").id, activate_by=in_days(30)),
        PostOrderResponse,
    )
    cancellable_id = to_cancel.order.id if to_cancel else None


def cancel():
    answer = lab.cancel_order(need(cancellable_id, "a cancellable order"))
    expect_that(low_status(answer.order) == "cancelled", f"the order is {low_status(answer.order)} after cancelling")
    return answer


check("lab_tests.cancel_order", cancel, PostOrderResponse)

# Test kit registration.
registered = check(
    "testkit.register",
    lambda: client.testkit.register(
        user_id=USER_ID,
        sample_id=f"SDK{uuid.uuid4().hex[:12].upper()}",
        patient_details=patient,
        patient_address=address,
        physician=PhysicianCreateRequestBase(first_name="Gregory", last_name="House", npi="1234567893"),
        consents=consents,
    ),
    PostOrderResponse,
)
check("lab_tests.get_order (registered kit)", lambda: lab.get_order(need(registered, "the registered kit").order.id), ClientFacingOrder)

# An unregistered test kit: ordered to an address, registered later by the sample id on its order.
def order_unregistered_kit():
    kits = [t for t in need(tests, "the lab tests") if t.method.value == "testkit" and t.status.value == "active"]
    shipping = ShippingAddressWithValidation(
        receiver_name="Front Desk", first_line="500 Market St", city="San Francisco", state="CA", zip="94105", country="US", phone_number="+14155550100"
    )
    answer = client.testkit.create_order(user_id=USER_ID, lab_test_id=need(kits[0] if kits else None, "an active test-kit test").id, shipping_details=shipping, passthrough="sdk-check")
    expect_that(low_status(answer.order) == "awaiting_registration", f"the kit is {low_status(answer.order)}, not awaiting_registration")
    return answer


kit_order = check("testkit.create_order", order_unregistered_kit, PostOrderResponse)


def register_ordered_kit():
    kit = need(kit_order, "the unregistered kit").order
    answer = client.testkit.register(user_id=USER_ID, sample_id=kit.sample_id, patient_details=patient, patient_address=address,
        physician=PhysicianCreateRequestBase(first_name="Gregory", last_name="House", npi="1234567893"), consents=consents,
    )
    expect_that(answer.order.id == kit.id, f"registration made order {answer.order.id}, not the kit's {kit.id}")
    expect_that(low_status(answer.order) == "testkit_registered", f"the kit is {low_status(answer.order)} after registration")
    return answer


check("testkit.register (the unregistered kit)", register_ordered_kit, PostOrderResponse)


def search_orders():
    kit = need(kit_order, "the unregistered kit").order
    by_sample = lab.get_orders(search_input=kit.sample_id)
    expect_that([o.id for o in by_sample.orders] == [kit.id], f"search_input={kit.sample_id}: {[o.id for o in by_sample.orders]}")
    by_name = lab.get_orders(patient_name=f"{patient.first_name} {patient.last_name}".upper(), user_id=USER_ID, size=100)
    expect_that(kit.id in [o.id for o in by_name.orders], "patient_name did not find the registered kit")
    return by_name


check("lab_tests.get_orders (search_input, patient_name)", search_orders, GetOrdersResponse)

# Order transactions: a sample failure, its redraw, and the transaction holding both.
check(
    "raw GET /v3/order_transaction/{id}",
    lambda: raw("GET", f"v3/order_transaction/{transaction_id(need(order, 'an order'))}"),
    dict,
)


def redraw():
    failed = create_order(need(walk_in, "the lab test").id).order.id
    dispatched(failed)
    lab.simulate_order_process(failed, final_status="failed.walk_in_test.sample_error", delay=0)
    wait_for(failed, {"sample_error", "redraw_available"})
    answer = parse_obj_as(PostOrderResponse, raw("POST", f"v3/order/{failed}/redraw"))
    expect_that(answer.order.id != failed, "the redraw is the failed order itself")
    txn = raw("GET", f"v3/order_transaction/{transaction_id(answer.order)}")
    expect_that({o["id"] for o in txn.get("orders", [])} == {failed, answer.order.id}, f"transaction orders: {txn.get('orders')}")
    return answer


check("raw POST /v3/order/{id}/redraw + order_transaction", redraw, PostOrderResponse)

finish()
