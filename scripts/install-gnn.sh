#!/usr/bin/env bash
# Idempotent: DGL 2.1.0 and what it really needs, into the project venv (.venv),
# without ever touching the torch that scripts/install.sh put there first.
#
# Why each piece (see hosts/gnn/dglenv.py for the import side):
# - dgl 2.1.0 is the newest DGL with a Linux cp311 wheel. It goes in with --no-deps,
#   and so does torchdata, because both declare an open-ended torch requirement a
#   resolver may satisfy with a new (CUDA) torch; their real needs are listed below.
# - torchdata 0.9.0: dgl imports torchdata.datapipes, which 0.10+ dropped.
# - packaging, pandas, pydantic, PyYAML: imported by `import dgl`, undeclared.
# - Every pin is what pip picked at the time of writing; the constraint keeps torch
#   at the installed 2.13.0 for the packages installed with their dependencies.
# Needs .venv from scripts/install.sh. A second run only compares a stamp.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
TORCH_PIN="torch==2.13.0"
NO_DEPS="dgl==2.1.0 torchdata==0.9.0"
DGL_NEEDS="numpy==2.4.6 scipy==1.17.1 networkx==3.6.1 requests==2.34.2 tqdm==4.70.1 psutil==7.2.2 urllib3==2.8.0"
IMPORTED_UNDECLARED="packaging==26.3 pandas==3.1.1 pydantic==2.14.3 PyYAML==6.0.3"

[ -x "$VENV/bin/python" ] || { echo "install-gnn: no $VENV; run scripts/install.sh first" >&2; exit 1; }
stamp="$VENV/.trainbed-gnn-installed"
want=$(sha256sum scripts/install-gnn.sh | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && "$VENV/bin/python" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("dgl") is None)'; then
  echo "install-gnn: up to date"
  exit 0
fi

pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
echo "$TORCH_PIN" > "$constraints"
# shellcheck disable=SC2086  # word splitting of the package lists is intended
pip install -c "$constraints" $DGL_NEEDS $IMPORTED_UNDECLARED
# shellcheck disable=SC2086
pip install --no-deps $NO_DEPS

"$VENV/bin/python" - <<'PY'
import torch
assert torch.__version__.split("+")[0] == "2.13.0", f"torch changed to {torch.__version__}"
from hosts.gnn.dglenv import import_dgl
print("install-gnn: dgl", import_dgl().__version__, "with torch", torch.__version__)
PY
echo "$want" > "$stamp"
echo "install-gnn: done"
