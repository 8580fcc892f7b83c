#!/usr/bin/env bash
# Debian's own Open MPI (4.1) and MPICH (4.0) beside the wheels: the "site" installations of
# tests/test_installations.py (two versions of one family in one campaign, a catalogue read
# from the library, bad declarations refused); and gdb, with which `harness whatran` sees
# what a library ran (tests/test_whatran.py). Idempotent; needs root.
set -euo pipefail
PKGS=(openmpi-bin libopenmpi-dev mpich libmpich-dev gdb)
if dpkg-query -W -f='${Status}\n' "${PKGS[@]}" 2>/dev/null | grep -qv "install ok installed" ||
   ! dpkg-query -W "${PKGS[@]}" >/dev/null 2>&1; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${PKGS[@]}"
fi
for f in /usr/bin/mpiexec.openmpi /usr/bin/mpiexec.mpich /usr/bin/gdb \
         /usr/lib/x86_64-linux-gnu/libmpi.so.40 /usr/lib/x86_64-linux-gnu/libmpich.so.12; do
  [ -e "$f" ] || { echo "debian-mpi: $f is missing after the install" >&2; exit 1; }
done
echo "debian-mpi: Open MPI $(dpkg-query -W -f='${Version}' openmpi-bin), MPICH $(dpkg-query -W -f='${Version}' mpich)"
