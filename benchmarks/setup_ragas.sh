#!/usr/bin/env bash
# The reference library in its own venv (ragas 0.4.3 only imports with langchain-community 0.3.31;
# its string metrics need rapidfuzz, pinned to the version turneval uses).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${RAGAS_VENV:-$here/.ragas-venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "ragas==0.4.3" "langchain-community==0.3.31" "rapidfuzz==3.14.6"
echo "$venv/bin/python"
