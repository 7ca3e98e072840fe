#!/usr/bin/env bash
# Property-based API test with Schemathesis (PyPI) against a running `npm run dev`: every check
# (no 5xx, responses match their schemas, only documented statuses, positive data accepted, negative
# data rejected, auth not ignored, ...), with the dev sandbox's real org, team and a webhook of its own as
# path parameters, so operations get past their 404s.
#
#   npm run dev                       # in another terminal
#   scripts/schemathesis.sh           # or: MAX_EXAMPLES=100 scripts/schemathesis.sh --phases=fuzzing
#
# Extra arguments go to `st run`. Environment: CREDENTIALS (default .devstack/credentials.json),
# MAX_EXAMPLES (default 30 per operation), ST_VENV (default .devstack/schemathesis-venv; created once
# with pip), PYTHON (default: the first Python 3.12+ found, else python3; CPython 3.11.7's ast.parse
# fails deep inside Hypothesis on some of our schemas),
# SCHEMATHESIS_VERSION (default pinned below).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
credentials="${CREDENTIALS:-$root/.devstack/credentials.json}"
venv="${ST_VENV:-$root/.devstack/schemathesis-venv}"
version="${SCHEMATHESIS_VERSION:-4.32.5}"

if [[ ! -f "$credentials" ]]; then
  echo "schemathesis: $credentials not found; start the service with 'npm run dev' first." >&2
  exit 2
fi
cred() { node -e "process.stdout.write(String(require(process.argv[1])[process.argv[2]]))" "$credentials" "$1"; }
base_url="$(cred base_url)"
org_id="$(cred org_id)"
team_id="$(cred team_id)"
team_key="$(cred team_api_key)"
management_key="$(cred management_key)"

# The first Python 3.12+ that runs (pyenv shims of versions not selected fail), else python3.
pick_python() {
  local c
  for c in python3.13 python3.12 $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3 2>/dev/null) python3; do
    if "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then echo "$c"; return; fi
  done
  echo python3
}

if [[ ! -x "$venv/bin/st" ]] || ! "$venv/bin/st" --version 2>/dev/null | grep -q " $version\$"; then
  python="${PYTHON:-$(pick_python)}"
  echo "schemathesis: installing schemathesis==$version into $venv with $("$python" --version) ..."
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$version"
fi

environment="$(curl -fsS "$base_url/openapi.json" | node -e "
  let s = ''; process.stdin.on('data', (c) => (s += c)).on('end', () => {
    const d = JSON.parse(s).servers[0].description.split(' ');
    process.stdout.write(d[0] + ' ' + d[1]);
  });")"
read -r env_name region <<<"$environment"

# Webhooks and users of the run's own: one to work with, one for the DELETE operations to delete (the
# webhooks on a loopback port nothing listens on: their deliveries fail quietly).
json_field() { node -e "process.stdout.write(String(JSON.parse(require('fs').readFileSync(0, 'utf8'))[process.argv[1]]))" "$1"; }
new_webhook() {
  curl -fsS -X POST "$base_url/v1/org/$org_id/team/$team_id/$env_name/webhook" \
    -H "X-Management-Key: $management_key" -H 'content-type: application/json' \
    -d "{\"url\": \"http://127.0.0.1:9/schemathesis\", \"description\": \"schemathesis run $1\"}" | json_field id
}
new_user() {
  curl -fsS -X POST "$base_url/v2/user/" -H "x-service-api-key: $team_key" -H 'content-type: application/json' \
    -d "{\"client_user_id\": \"schemathesis-$(date +%s)-$$-$1\"}" | json_field user_id
}
webhook_id="$(new_webhook main)"
doomed_webhook_id="$(new_webhook delete)"
user_id="$(new_user main)"
doomed_user_id="$(new_user delete)"
echo "schemathesis: $base_url, org $org_id, team $team_id ($env_name/$region), webhook $webhook_id, user $user_id"

config="$(mktemp -t schemathesis-XXXXXX.toml)"
trap 'rm -f "$config"' EXIT
cat >"$config" <<EOF
request-timeout = 20.0

[auth.openapi.teamApiKey]
api_key = "$team_key"

[auth.openapi.managementKey]
api_key = "$management_key"

[parameters]
"path.org_id" = "$org_id"
"path.team_id" = "$team_id"
"path.environment" = "$env_name"
"path.region" = "$region"
"path.webhook_id" = "$webhook_id"
"path.user_id" = "$user_id"

# Schema-valid requests may still break a rule beyond the schema, which the API answers with a 422 (or a
# 400) by design (README, Errors): an opaque cursor that is not one, a name that is not an IANA time zone,
# a webhook URL the SSRF rules refuse, ids that must exist (teams, markers, lab tests), this deployment's
# region, date order, "exactly one of" query parameters, a client_user_id that exists already.
[[operations]]
include-method = "DELETE"
include-path = "/v1/org/{org_id}/team/{team_id}/{environment}/webhook/{webhook_id}"
parameters = { "path.webhook_id" = "$doomed_webhook_id" }

[[operations]]
include-method = "DELETE"
include-path = "/v2/user/{user_id}"
parameters = { "path.user_id" = "$doomed_user_id" }

[checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "422", "429", "5xx"]
EOF

set +e
"$venv/bin/st" --config-file "$config" run "$base_url/openapi.json" \
  --checks all \
  --max-examples "${MAX_EXAMPLES:-30}" \
  --workers 2 \
  "$@"
status=$?
set -e

# The run's webhooks go (its users, teams and keys stay: the sandbox keeps what a client would have made).
for id in "$webhook_id" "$doomed_webhook_id"; do
  curl -sS -o /dev/null -X DELETE "$base_url/v1/org/$org_id/team/$team_id/$env_name/webhook/$id" -H "X-Management-Key: $management_key" || true
done
exit $status
