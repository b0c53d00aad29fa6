#!/usr/bin/env bash
# Idempotent setup: Debian packages, the project venv (.venv) with the local CPU
# torch wheel installed first, the project itself (editable), and Debian's
# mininet made importable from the venv. A second run with nothing changed only
# compares a stamp and exits.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
# chromium: the headless browser the report tests load report.html in; gcc: builds
# experiments/platform/ovs_send.c, the sendmmsg the switches run with
APT_PACKAGES="mininet openvswitch-switch iperf3 tcpdump iptables ethtool iputils-ping iproute2 util-linux python3-venv chromium gcc libc6-dev"

stamp_inputs() { cat setup.cfg pyproject.toml scripts/install.sh scripts/install-gnn.sh; }
want=$(stamp_inputs | sha256sum | cut -c1-16)
if [ -f "$VENV/.trainbed-installed" ] && [ "$(cat "$VENV/.trainbed-installed")" = "$want" ] \
   && command -v ovs-vswitchd >/dev/null && command -v iperf3 >/dev/null; then
  echo "install: up to date"
  exit 0
fi

missing=""
for p in $APT_PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || missing+=" $p"; done
if [ -n "$missing" ]; then
  echo "install: apt-get install$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq $missing >/dev/null
fi

PY=$(command -v python3.11 || echo /usr/bin/python3)
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
# torch first, from the local CPU wheel; everything after sees the pin satisfied.
"$VENV/bin/python" -c 'import torch' 2>/dev/null || pip install torch==2.13.0
pip install -e '.[test]'

# Debian's mininet lives in /usr/lib/python3/dist-packages; expose only it.
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$VENV/debian-mininet"
ln -sfn /usr/lib/python3/dist-packages/mininet "$VENV/debian-mininet/mininet"
echo "$(realpath "$VENV/debian-mininet")" > "$site/trainbed-debian-mininet.pth"
"$VENV/bin/python" -c 'import mininet.net, os_ken, torch, torch_geometric, yaml, scapy, distributed'
# DGL (CPU) for the distributed GNN workload: its own pins, torch left as it is.
bash scripts/install-gnn.sh

echo "$want" > "$VENV/.trainbed-installed"
echo "install: done"
