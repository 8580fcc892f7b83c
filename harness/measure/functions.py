"""Where the collective functions of an MPI library are, read from its ELF file: what
``harness whatran`` sets its breakpoints on.

Three sources, in order, each giving ``name -> address`` (relative to the file's load base):

* the symbol tables (``.symtab`` when the file is not stripped, as Intel MPI's is not;
  ``.dynsym``, where Open MPI exports ``ompi_coll_base_allreduce_intra_*``);
* for a stripped library (MPICH's wheel, Debian's MPICH): each ``MPIR_Allreduce_intra_<x>``
  passes its own name (``__func__``) to its error path, so the string is in ``.rodata``; the
  RIP-relative ``lea`` instructions of ``.text`` that load its address are found, and the
  ``.eh_frame`` entry (FDE) holding such an instruction gives the function's first address.
  A name whose references fall in more than one function is left out (ambiguous).

The table is kept under ``.mpi/identities/`` keyed by the file's path, size and time (the FDE
scan of a 13 MB library takes about 3 s).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import re

import numpy as np

from .. import fileio, paths

ANCHOR = "MPI_Pcontrol"  # the marker function whatran's program calls before each size


def _key(path: str, pattern: str) -> str:
    st = os.stat(path)
    blob = json.dumps([os.path.realpath(path), st.st_size, st.st_mtime_ns, pattern, 2])
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


def table(path: str, pattern: str) -> dict:
    """``{"functions": {name: address}, "how": ..., "anchor": address}`` for the functions of
    the ELF file ``path`` whose names match ``pattern`` (a regex, fully)."""
    cache = paths.mpi_root() / "identities" / f"functions-{_key(path, pattern)}.json"
    try:
        return json.loads(cache.read_text())
    except (OSError, ValueError):
        pass
    out = _read(path, re.compile(pattern))
    fileio.write_json(cache, out)
    return out


def _read(path: str, pattern) -> dict:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    with open(path, "rb") as fh:
        elf = ELFFile(fh)
        found, anchor, how = {}, None, []
        for name in (".symtab", ".dynsym"):
            sec = elf.get_section_by_name(name)
            if not isinstance(sec, SymbolTableSection):
                continue
            n = 0
            for sym in sec.iter_symbols():
                if sym["st_info"]["type"] != "STT_FUNC" or not sym["st_value"]:
                    continue
                if sym.name in (ANCHOR, "P" + ANCHOR) and anchor is None:
                    anchor = sym["st_value"]
                if pattern.fullmatch(sym.name) and sym.name not in found:
                    found[sym.name] = sym["st_value"]
                    n += 1
            if n:
                how.append(f"{n} from {name}")
        if not found:
            found = _by_func_strings(elf, fh, pattern)
            how.append(f"{len(found)} from their __func__ strings (the file is stripped)")
    return {"functions": found, "anchor": anchor, "how": "; ".join(how)}


def _by_func_strings(elf, fh, pattern) -> dict:
    from elftools.dwarf.callframe import FDE

    ro, text = elf.get_section_by_name(".rodata"), elf.get_section_by_name(".text")
    if ro is None or text is None:
        return {}
    fh.seek(ro["sh_offset"])
    rodata = fh.read(ro["sh_size"])
    names = {}
    for m in re.finditer(rb"\x00([A-Za-z_]\w+)\x00", rodata):
        name = m.group(1).decode()
        if pattern.fullmatch(name):
            names[ro["sh_addr"] + m.start(1)] = name
    if not names:
        return {}
    fh.seek(text["sh_offset"])
    code = np.frombuffer(fh.read(text["sh_size"]), dtype=np.uint8)
    n = len(code) - 7
    # lea disp32(%rip), %reg: REX.W (0x48 or 0x4c), 0x8d, ModRM with mod 00 and r/m 101
    at = np.flatnonzero((code[1:n + 1] == 0x8D) & ((code[:n] == 0x48) | (code[:n] == 0x4C))
                        & ((code[2:n + 2] & 0xC7) == 0x05))
    disp = code[at + 3].astype(np.int64) | (code[at + 4].astype(np.int64) << 8) | (
        code[at + 5].astype(np.int64) << 16) | (code[at + 6].astype(np.int64) << 24)
    disp = np.where(disp >= 2**31, disp - 2**32, disp)
    target = text["sh_addr"] + at + 7 + disp
    hit = np.isin(target, np.fromiter(names, dtype=np.int64))
    refs: dict[str, list[int]] = {}
    for pos, tgt in zip(at[hit], target[hit]):
        refs.setdefault(names[int(tgt)], []).append(int(text["sh_addr"] + pos))
    spans = sorted((e.header["initial_location"], e.header["initial_location"] + e.header["address_range"])
                   for e in elf.get_dwarf_info(follow_links=False).EH_CFI_entries()
                   if isinstance(e, FDE))
    starts = [s for s, _ in spans]
    found = {}
    for name, where in refs.items():
        funcs = set()
        for addr in where:
            k = bisect.bisect_right(starts, addr) - 1
            if k >= 0 and spans[k][0] <= addr < spans[k][1]:
                funcs.add(spans[k][0])
        if len(funcs) == 1:
            found[name] = funcs.pop()
    return found
