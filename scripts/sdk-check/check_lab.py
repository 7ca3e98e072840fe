"""Calls every lab endpoint Healthbridge implements through the official Python SDK (PyPI `vital`) and
checks that each response parses into the SDK's own models, as a migrating customer's code would.

Environment: HB_BASE_URL, HB_API_KEY, HB_USER_ID (a user of the key's team). Prints `OK <call>` or
`FAIL <call>: <error>` per call and exits non-zero if any call failed.
"""
import os
import sys
import time
import uuid

from vital import Vital
from vital.types import (
    ClientFacingLabTest,
    ClientFacingOrder,
    Consent,
    PatientAddressWithValidation,
    PatientDetailsWithValidation,
    PhysicianCreateRequestBase,
    OrderSetRequest,
)

base_url = os.environ["HB_BASE_URL"]
key = os.environ["HB_API_KEY"]
user_id = os.environ["HB_USER_ID"]
# As the guide for migrating customers says: our URL, and our header next to the SDK's own.
client = Vital(api_key=key, base_url=base_url, headers={"x-service-api-key": key})
failures = []


def check(name, call, expect=None):
    try:
        value = call()
        if expect is not None and not isinstance(value, expect):
            raise TypeError(f"parsed as {type(value).__name__}, not {expect.__name__}")
        print(f"OK {name}", flush=True)
        return value
    except Exception as err:  # noqa: BLE001 - report every failure, keep going
        failures.append(name)
        print(f"FAIL {name}: {type(err).__name__}: {str(err)[:1500]}", flush=True)
        return None


def wait_for(order_id, low, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        order = client.lab_tests.get_order(order_id)
        if order.events and str(order.events[-1].status).split(".")[-1] == low:
            return order
        time.sleep(0.3)
    raise TimeoutError(f"order {order_id} did not reach {low}")


patient = PatientDetailsWithValidation(
    first_name="Ana", last_name="Smith", dob="1988-04-12", gender="female", phone_number="+14155552671", email="ana@example.com"
)
address = PatientAddressWithValidation(
    receiver_name="Ana Smith", first_line="123 Main St", second_line="Apt 4", city="San Francisco", state="CA", zip="94105", country="US"
)
physician = PhysicianCreateRequestBase(first_name="Gregory", last_name="House", npi="1234567893")

tests = check("lab_tests.get", lambda: client.lab_tests.get(), list) or []
check("lab_tests.get_paginated", lambda: client.lab_tests.get_paginated(lab_test_limit=3))
walk_in = next(t for t in tests if str(t.method) .endswith("walk_in_test") and str(t.status).endswith("active"))
check("lab_tests.get_by_id", lambda: client.lab_tests.get_by_id(walk_in.id), ClientFacingLabTest)
markers = check("lab_tests.get_markers", lambda: client.lab_tests.get_markers(size=100))
check("lab_tests.get_markers_for_lab_test", lambda: client.lab_tests.get_markers_for_lab_test(walk_in.id))
check("lab_tests.get_labs", lambda: client.lab_tests.get_labs(), list)
if markers:
    same_lab = [m.id for m in markers.markers if m.lab_id == walk_in.lab.id and str(m.type).endswith("biomarker")][:2]
    created = check(
        "lab_tests.create",
        lambda: client.lab_tests.create(name=f"SDK check {uuid.uuid4().hex[:8]}", method="walk_in_test", description="SDK", marker_ids=same_lab),
        ClientFacingLabTest,
    )
    if created:
        check("lab_tests.update_lab_test", lambda: client.lab_tests.update_lab_test(created.id, name=f"SDK renamed {uuid.uuid4().hex[:8]}"), ClientFacingLabTest)

order_response = check(
    "lab_tests.create_order",
    lambda: client.lab_tests.create_order(
        user_id=user_id,
        patient_details=patient,
        patient_address=address,
        order_set=OrderSetRequest(lab_test_ids=[walk_in.id]),
        physician=physician,
        consents=[Consent(consent_type="terms-of-use")],
    ),
)
if order_response:
    order_id = order_response.order.id
    check("lab_tests.get_order", lambda: client.lab_tests.get_order(order_id), ClientFacingOrder)
    check("lab_tests.get_orders", lambda: client.lab_tests.get_orders(user_id=user_id, size=5))
    wait_for(order_id, "requisition_created")
    check("lab_tests.get_order_requistion_pdf", lambda: b"".join(client.lab_tests.get_order_requistion_pdf(order_id)))
    check("lab_tests.simulate_order_process", lambda: client.lab_tests.simulate_order_process(order_id, final_status="completed.walk_in_test.completed"))
    wait_for(order_id, "completed")
    check("lab_tests.get_order (completed)", lambda: client.lab_tests.get_order(order_id), ClientFacingOrder)
    check("lab_tests.get_result_raw", lambda: client.lab_tests.get_result_raw(order_id))
    check("lab_tests.get_result_metadata", lambda: client.lab_tests.get_result_metadata(order_id))
    check("lab_tests.get_result_pdf", lambda: b"".join(client.lab_tests.get_result_pdf(order_id)))

scheduled = check(
    "lab_tests.create_order (activate_by)",
    lambda: client.lab_tests.create_order(
        user_id=user_id,
        patient_details=patient,
        patient_address=address,
        order_set=OrderSetRequest(lab_test_ids=[walk_in.id]),
        activate_by="2099-01-01",
    ),
)
if scheduled:
    check("lab_tests.cancel_order", lambda: client.lab_tests.cancel_order(scheduled.order.id))

registered = check(
    "testkit.register",
    lambda: client.testkit.register(
        user_id=user_id,
        sample_id=f"SDK{uuid.uuid4().hex[:12]}",
        patient_details=patient,
        patient_address=address,
        physician=physician,
        consents=[Consent(consent_type="terms-of-use")],
    ),
)
if registered:
    check("lab_tests.get_order (registered kit)", lambda: client.lab_tests.get_order(registered.order.id), ClientFacingOrder)

print(f"{len(failures)} failed" if failures else "all SDK calls parsed", flush=True)
sys.exit(1 if failures else 0)
