#!/usr/bin/env bash
# Puts the external test data (JSON Schema test suite, BFCL schemas, retrieval sets) at DIR for
# runners that do not have it beside the checkout. The data is not ours to commit, so it comes from
# a tarball the repository points at: `PRISM_TOOLS_TEST_DATA_URL` (a repository variable) with its
# SHA-256 in `PRISM_TOOLS_TEST_DATA_SHA256`. With neither set and no data at DIR this fails, as the
# tests would under CI=true.
#
#   DATA_URL=... DATA_SHA256=... .ci/fetch-data.sh ../shared/data
set -euo pipefail

dest="${1:?usage: fetch-data.sh DIR}"
if [[ -d "$dest/jsonschema-suite" && -d "$dest/bfcl" && -d "$dest/retrieval" ]]; then
	echo "fetch-data.sh: test data already at $dest"
	exit 0
fi
: "${DATA_URL:?fetch-data.sh: no test data at $dest and DATA_URL (PRISM_TOOLS_TEST_DATA_URL) is unset}"
: "${DATA_SHA256:?fetch-data.sh: DATA_SHA256 (PRISM_TOOLS_TEST_DATA_SHA256) is unset}"

archive="$(mktemp -d)/data.tar.gz"
curl --fail --silent --show-error --location --retry 3 --output "$archive" "$DATA_URL"
python="$(command -v python3 || command -v python)"
"$python" - "$archive" "$DATA_SHA256" <<'PY'
import hashlib
import sys

digest = hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest()
if digest != sys.argv[2].lower():
    sys.exit(f"fetch-data.sh: checksum mismatch: got {digest}")
PY
mkdir -p "$dest"
tar -xzf "$archive" -C "$dest"
for part in jsonschema-suite bfcl retrieval; do
	[[ -d "$dest/$part" ]] || { echo "fetch-data.sh: the archive has no $part/" >&2; exit 1; }
done
echo "fetch-data.sh: test data unpacked at $dest"
