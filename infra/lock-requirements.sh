#!/usr/bin/env bash
# Regenerate infra/requirements.lock: install the runtime dependencies that pyproject.toml names
# (with the [postgres] extra) into a fresh virtual environment and freeze what pip resolved.
# Run with the Python the image uses (3.11):  PYTHON=python3.11 bash infra/lock-requirements.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$PY" - >"$WORK/requirements.in" <<'EOF'
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["postgres"]))
EOF
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q -r "$WORK/requirements.in"
{
    sed -n '1,/^# here within its range\.$/p' infra/requirements.lock
    "$WORK/venv/bin/pip" freeze --exclude gpucost
} >"$WORK/requirements.lock"
mv "$WORK/requirements.lock" infra/requirements.lock
echo "wrote infra/requirements.lock ($(grep -c '==' infra/requirements.lock) pins)" >&2
