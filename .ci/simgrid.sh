#!/usr/bin/env bash
# Debian's SimGrid (3.32): the simulated platforms of harness/simulate/ (docs/simulation.md):
# python3-simgrid, the Python module the simulated communicator runs on (loaded by path into
# the project's Python 3.11, harness/simulate/loader.py), and smpicc/smpirun with
# libsimgrid-dev, which compile and run the SMPI reference (harness/simulate/smpi.py;
# tests/test_simulate.py). Idempotent; needs root.
set -euo pipefail
PKGS=(libsimgrid-dev python3-simgrid)
if dpkg-query -W -f='${Status}\n' "${PKGS[@]}" 2>/dev/null | grep -qv "install ok installed" ||
   ! dpkg-query -W "${PKGS[@]}" >/dev/null 2>&1; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${PKGS[@]}"
fi
for f in /usr/bin/smpicc /usr/bin/smpirun; do
  [ -e "$f" ] || { echo "simgrid: $f is missing after the install" >&2; exit 1; }
done
ls /usr/lib/python3/dist-packages/simgrid.cpython-*.so >/dev/null 2>&1 ||
  { echo "simgrid: python3-simgrid's module is missing after the install" >&2; exit 1; }
echo "simgrid: SimGrid $(dpkg-query -W -f='${Version}' libsimgrid-dev)"
