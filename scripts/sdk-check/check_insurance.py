"""Drives the insurance endpoints (closed beta) through the official Python SDK (PyPI `vital`, pinned in
requirements.txt) and checks that each response parses into the SDK's own models.

Environment:
  HB_BASE_URL   our server, e.g. http://127.0.0.1:3000
  HB_API_KEY    a team API key of a team enabled for the insurance beta
  HB_USER_ID    a user of that team without insurance records

Prints `OK <call>` or `FAIL <call>: <error>` per call and exits 1 if any call failed.
"""
import os
import sys

from vital import Address, Gender, GuarantorDetails, ResponsibleRelationship, VitalCoreSchemasDbSchemasLabTestInsurancePersonDetails
from vital.core.api_error import ApiError
from vital.types import ClientFacingInsurance, ClientFacingPayorSearchResponse, ClientFacingPayorSearchResponseDeprecated

from sdkcheck import check, client, expect_that, finish

USER_ID = os.environ.get("HB_USER_ID")
if not USER_ID:
    sys.exit("set HB_USER_ID")

address = Address(first_line="1 Main Street", country="US", zip="60601", city="Chicago", state="IL")
insured = VitalCoreSchemasDbSchemasLabTestInsurancePersonDetails(
    first_name="Marta",
    last_name="Quinlivan",
    gender=Gender.FEMALE,
    address=address,
    dob="1984-03-02",
    email="marta@example.com",
    phone_number="+13125550142",
)


def create_primary():
    # As the original's SDK sends it: no `company` (it comes from the payor catalogue).
    record = client.user.create_insurance(USER_ID, payor_code="MEDFED", member_id="MBR-1", relationship=ResponsibleRelationship.SELF, insured=insured)
    expect_that(record.company.name == "Medicare", f"company {record.company!r}")
    expect_that(record.insured.gender == Gender.FEMALE, f"gender {record.insured.gender!r}")
    return record


def create_secondary():
    guarantor = GuarantorDetails(first_name="Piet", last_name="Quinlivan", address=address, phone_number="+13125550143", household_size=2)
    return client.user.create_insurance(
        USER_ID, payor_code="MAIDFED", member_id="MBR-2", group_id="GRP-2", relationship=ResponsibleRelationship.SPOUSE, insured=insured, guarantor=guarantor, is_primary=False
    )


def latest(is_primary):
    record = client.user.get_latest_insurance(USER_ID, is_primary=is_primary)
    expect_that(record.is_primary is is_primary, f"is_primary {record.is_primary!r}")
    return record


def missing_latest_is_404():
    try:
        client.user.get_latest_insurance("00000000-0000-4000-8000-000000000000")
    except ApiError as err:
        expect_that(err.status_code == 404 and isinstance(err.body, dict) and "detail" in err.body, f"HTTP {err.status_code} {err.body!r}")
        return True
    raise AssertionError("no error for an unknown user")


def search():
    found = client.insurance.search_get_payor_info(insurance_name="medicaid")
    expect_that([p.payor_code for p in found] == ["MAIDFED"], f"found {[p.payor_code for p in found]}")
    expect_that(all(isinstance(p, ClientFacingPayorSearchResponse) for p in found), "items are not ClientFacingPayorSearchResponse")
    return found


def search_deprecated():
    found = client.insurance.search_payor_info(insurance_name="aetna")
    expect_that([p.code for p in found] == ["AETNA"], f"found {[p.code for p in found]}")
    expect_that(all(isinstance(p, ClientFacingPayorSearchResponseDeprecated) for p in found), "items are not ClientFacingPayorSearchResponseDeprecated")
    return found


check("user.create_insurance (primary, no company)", create_primary, ClientFacingInsurance)
check("user.create_insurance (secondary, guarantor)", create_secondary, ClientFacingInsurance)
check("user.get_latest_insurance", lambda: latest(True), ClientFacingInsurance)
check("user.get_latest_insurance (is_primary=False)", lambda: latest(False), ClientFacingInsurance)
check("user.get_latest_insurance (404)", missing_latest_is_404)
check("insurance.search_get_payor_info", search, list)
check("insurance.search_payor_info (deprecated POST)", search_deprecated, list)

finish()
