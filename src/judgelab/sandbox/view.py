"""What a sandboxed run may see of the host's files: an allowlist, found once per interpreter.

The launcher (launcher.build_view) builds a new root from `View.binds` alone and covers
`View.hide` inside them; the host's root is then detached. The allowlist is what the code's
interpreter needs to start and to import its standard library, and nothing chosen by
exclusion:
- the interpreter's executable and its ELF program interpreter (the dynamic loader, found
  through the path the executable names: /lib64 -> usr/lib64 and the like are recreated);
- its standard library directories (`sysconfig`'s stdlib and platstdlib, lib-dynload, the
  zipped stdlib when there is one), with any site-packages or dist-packages inside them
  covered: the code runs the standard library only, as the task promised;
- every shared library it maps once each lib-dynload module is imported (libc, libm, libz,
  libssl, libffi, libpython where it is shared, the locale archive), each file alone, with
  the symlinks beside it that name it (the sonames the loader looks up): not their folders,
  which hold hundreds of other libraries. A folder of several is staged once (`staged`): a
  copy of those libraries and their links, in a folder of ours, mounted where the folder is.
A checkout, a virtual environment, a home directory, /etc, /opt, /srv, /var: none is bound,
whatever its permissions, so none holds an answer key the code could open.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PT_INTERP = 3
# Run by the interpreter itself (as the sandbox uid, isolated, without site): what it is,
# where its standard library lies and which files it maps with every extension module loaded.
_SURVEY = r"""
import importlib, json, os, sys, sysconfig
dynload = [p for p in sys.path if p.endswith("lib-dynload")]
for folder in dynload:
    for name in sorted(os.listdir(folder)):
        if name.endswith(".so") and not name.startswith(("_test", "xx")):
            try:
                importlib.import_module(name.split(".")[0])
            except BaseException:
                pass
mapped = set()
with open("/proc/self/maps") as maps:
    for line in maps:
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].strip().startswith("/"):
            mapped.add(parts[5].strip())
paths = sysconfig.get_paths()
print(json.dumps({
    "executable": os.path.realpath(sys.executable),
    "stdlib": [paths["stdlib"], paths["platstdlib"], *dynload,
               *[p for p in sys.path if p.endswith(".zip")]],
    "packages": [paths["purelib"], paths["platlib"]],
    "mapped": sorted(mapped),
}))
"""


@dataclass(frozen=True)
class View:
    """Host paths the run sees (each at its own path, read-only), folders among them that are
    covered with an empty one, and staged folders: (a folder of ours, the path it stands at)."""

    binds: tuple[str, ...]
    hide: tuple[str, ...]
    staged: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, list[Any]]:
        return {"binds": list(self.binds), "hide": list(self.hide),
                "staged": [list(pair) for pair in self.staged]}  # fmt: skip

    def visible(self) -> tuple[str, ...]:
        """Every host path the run sees, staged folders under the path they stand at."""
        return tuple(sorted({*self.binds, *(target for _, target in self.staged)}))


def staged(view: View, home: Path) -> View:
    """`view` with each folder of several shared libraries staged: the libraries (and the
    links naming them) copied once into a folder of ours under `home`, named by what they
    are, so that a run mounts one folder there instead of each library on its own."""
    folders: dict[str, list[str]] = {}
    for path in view.binds:
        if os.path.isfile(path) or os.path.islink(path):
            folders.setdefault(os.path.dirname(path), []).append(path)
    moves = []
    keep = set(view.binds)
    for folder, paths in sorted(folders.items()):
        libraries = [p for p in paths if ".so" in os.path.basename(p) and not os.path.islink(p)
                     and os.path.realpath(p) == p]  # fmt: skip
        if len(libraries) < 2 or folder in view.binds:
            continue
        inside = sorted(p for p in keep if p.startswith(folder + "/"))  # subfolders too
        moves.append((str(_stage(home, folder, inside)), folder))
        keep -= set(inside)
    return View(tuple(sorted(keep)), view.hide, tuple(moves))


def _stage(home: Path, folder: str, paths: list[str]) -> Path:
    """The copy of `paths` (files and links of `folder`), made once: named by their names,
    sizes and times, written aside and renamed into place."""
    facts = [(os.path.relpath(p, folder), os.lstat(p).st_size, os.lstat(p).st_mtime_ns)
             for p in paths]  # fmt: skip
    name = hashlib.sha256(json.dumps([folder, facts]).encode()).hexdigest()[:16]
    target = home / f"libs-{name}"
    if target.is_dir():
        return target
    scratch = Path(tempfile.mkdtemp(prefix="libs-", dir=home))
    for path in paths:
        here = scratch / os.path.relpath(path, folder)
        here.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        if os.path.islink(path):
            os.symlink(os.readlink(path), here)
        else:
            shutil.copy2(path, here)
    scratch.chmod(0o755)
    try:
        scratch.rename(target)
    except OSError:  # another process staged it first
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def elf_interpreter(path: str) -> str | None:
    """The program interpreter a 64-bit ELF executable names (PT_INTERP), or None."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:
                return None
            order = "<" if head[5] == 1 else ">"
            (phoff,) = struct.unpack_from(order + "Q", head, 32)
            phentsize, phnum = struct.unpack_from(order + "HH", head, 54)
            for index in range(phnum):
                handle.seek(phoff + index * phentsize)
                kind, _, offset, _, _, size = struct.unpack(order + "IIQQQQ", handle.read(40))
                if kind == PT_INTERP:
                    handle.seek(offset)
                    return handle.read(size).rstrip(b"\0").decode()
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    return None


def interpreter_view(python: str, env: dict[str, str], **run_as: object) -> View | None:
    """The allowlist for `python`, surveyed by running it (`run_as`: subprocess.run's user,
    group and extra_groups); None when the survey fails, and the run then cannot be isolated."""
    try:
        out = subprocess.run(
            [python, "-I", "-S", "-B", "-c", _SURVEY], env=env, cwd="/",
            stdin=subprocess.DEVNULL, capture_output=True, timeout=60, **run_as,  # type: ignore[arg-type]
        )  # fmt: skip
        found = json.loads(out.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as err:
        log.warning("sandbox: cannot survey %s for its file view: %s", python, err)
        return None
    return view_of(found)


def view_of(found: dict[str, object]) -> View:
    """The allowlist from a survey's findings (see _SURVEY)."""
    executable = str(found["executable"])
    stdlib = [str(p) for p in found["stdlib"] if os.path.exists(str(p))]  # type: ignore[attr-defined]
    binds = {executable, *stdlib}
    loader = elf_interpreter(executable)
    if loader:
        binds.add(loader)
    mapped = {os.path.realpath(str(p)) for p in found["mapped"]} - {executable}  # type: ignore[attr-defined]
    for path in sorted(mapped):
        if any(_within(path, s) for s in stdlib) or not os.path.isfile(path):
            continue
        binds.add(path)
        binds.update(_names_of(path))
    packages = {str(p) for p in found["packages"]}  # type: ignore[attr-defined]
    for folder in stdlib:
        for name in ("site-packages", "dist-packages"):
            packages.add(os.path.join(folder, name))
    hide = sorted(p for p in packages if any(_within(p, s) and p != s for s in stdlib)
                  and os.path.isdir(p))  # fmt: skip
    return View(binds=tuple(sorted(_outermost(binds))), hide=tuple(hide))


def _names_of(path: str) -> list[str]:
    """The symlinks in `path`'s folder that lead to it (libz.so.1 -> libz.so.1.2.13)."""
    folder = os.path.dirname(path)
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    return [e.path for e in entries if e.is_symlink() and os.path.realpath(e.path) == path]


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _outermost(paths: set[str]) -> list[str]:
    """`paths` without those inside another of them (a bind already brings them)."""
    kept: list[str] = []
    for path in sorted(paths, key=len):
        if not any(_within(path, k) for k in kept):
            kept.append(path)
    return kept
