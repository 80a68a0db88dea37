"""Model files: one ``.npz`` archive holding the arrays plus a JSON header, never pickle.

Layout: ``__header__`` is a uint8 array holding UTF-8 JSON
``{"format": "svmcore-model", "format_version": 1, "class": name, "params": {...}, "meta": {...}}``;
every other entry is a learned numeric array. The header is standard JSON (no NaN or Infinity tokens): a
non-finite float, such as PmSVM's p = -inf, is written as ``{"__float__": "-inf"}``. Files are written to a
temporary file in the target folder and renamed into place, so a crash never leaves a half-written model.
"""
from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import zipfile
from pathlib import Path

import numpy as np

FORMAT_VERSION = 1
_REGISTRY: dict[str, type] = {}


def register(cls):
    """Class decorator: make ``cls`` loadable by :func:`load` under its class name."""
    _REGISTRY[cls.__name__] = cls
    return cls


@contextlib.contextmanager
def atomic_write(path):
    """Context manager yielding a binary file whose content replaces ``path`` only on success.

    Writes to a temporary file in the target's folder, fsyncs, then ``os.replace`` (atomic on POSIX and
    Windows); on any exception the temporary file is removed and ``path`` is left untouched. The file gets
    the permission bits of the file it replaces, or 0666 & ~umask if new.
    """
    path = Path(os.path.realpath(path))  # through a symlink: replace its target, keep the link
    if not path.parent.is_dir():  # name the user's folder, not the temporary file mkstemp would report
        raise FileNotFoundError(f"cannot write {path}: folder {path.parent} does not exist")
    if path.is_dir():  # ("" is the current folder)
        raise IsADirectoryError(f"cannot write {path}: it is a folder; give a file name")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    try:
        # mkstemp's 0600 would make a new file private to its writer; a replaced one keeps its mode (a private
        # model stays private)
        os.chmod(tmp, stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _encode(value):
    """``value`` (JSON-able) with non-finite floats spelled out, which strict JSON readers (jq, JavaScript) need."""
    if isinstance(value, float) and not np.isfinite(value):
        return {"__float__": repr(value)}  # 'inf', '-inf', 'nan'
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(obj):
    if set(obj) == {"__float__"} and obj["__float__"] in ("inf", "-inf", "nan"):
        return float(obj["__float__"])
    return obj


def write_archive(path, header: dict, arrays: dict) -> Path:
    """Atomically write ``arrays`` (name -> ndarray) and the JSON ``header`` to ``path`` (.npz).

    Raises TypeError for an object-dtype array (it would need pickle) and OSError if the folder is not
    writable. Returns the path written.
    """
    path = Path(path)
    payload = {}
    for key, value in arrays.items():
        a = np.asarray(value)
        if a.dtype == object:
            raise TypeError(f"array {key!r} has dtype object and cannot be stored without pickle")
        payload[key] = a
    text = json.dumps(_encode(header), allow_nan=False)
    payload["__header__"] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    with atomic_write(path) as f:
        np.savez(f, **payload)
    return path


def read_archive(path, expected_format: str) -> tuple[dict, dict]:
    """Read an archive written by :func:`write_archive`; return ``(header, arrays)``.

    Raises FileNotFoundError if ``path`` does not exist and ValueError if it is not such an archive
    (not a zip/npz, no header, bad JSON, another format, a newer format version, object arrays).
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a folder, not a model file")
    if not path.is_file():
        raise FileNotFoundError(f"model file not found: {path}")
    if not zipfile.is_zipfile(path):  # np.load would accept a bare .npy array (or, unsafely, a pickle)
        raise ValueError(f"{path}: not a model file (not an .npz archive)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ValueError(f"{path}: not a readable model file ({exc})") from exc
    except ValueError as exc:  # numpy refuses object arrays (pickle) with ValueError
        raise ValueError(f"{path}: not a valid model file ({exc})") from exc
    if "__header__" not in arrays:
        raise ValueError(f"{path}: not a model file of this project (no header)")
    bad = [k for k, a in arrays.items() if not isinstance(a, np.ndarray)]  # np.load hands over raw bytes
    if bad:
        raise ValueError(f"{path}: not a valid model file ({bad[0]!r} is not a .npy array)")
    raw = arrays.pop("__header__")
    try:
        header = json.loads(raw.tobytes().decode("utf-8"), object_hook=_decode)  # (older files: -Infinity)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:  # (deeply nested brackets recurse)
        raise ValueError(f"{path}: model header is not valid JSON ({exc})") from exc
    if not isinstance(header, dict) or header.get("format") != expected_format:
        raise ValueError(f"{path}: not a {expected_format} file (format={header.get('format') if isinstance(header, dict) else None!r})")
    version = header.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or version > FORMAT_VERSION or version < 1:
        raise ValueError(f"{path}: unsupported format version {version!r} (this version reads {FORMAT_VERSION})")
    return header, arrays


def save(estimator, path) -> Path:
    """Save a fitted svmcore estimator to ``path`` (see the module docstring for the format)."""
    params, meta, arrays = estimator._get_state()
    header = {"format": "svmcore-model", "format_version": FORMAT_VERSION,
              "class": type(estimator).__name__, "params": params, "meta": meta}
    return write_archive(path, header, arrays)


def load(path):
    """Load an estimator saved by ``estimator.save(path)``.

    Raises FileNotFoundError for a missing file and ValueError for a corrupt, foreign or inconsistent
    file (not an .npz, unknown class, missing or unknown parameters, arrays or values, mis-typed or
    mis-shaped arrays, invalid hyperparameters or learned values). Never unpickles.
    """
    header, arrays = read_archive(path, "svmcore-model")
    name = header.get("class")
    cls = _REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"{path}: unknown model class {name!r}; known: {sorted(_REGISTRY)}")
    params = header.get("params")
    meta = header.get("meta")
    if not isinstance(params, dict) or not isinstance(meta, dict):
        raise ValueError(f"{path}: header lacks 'params' or 'meta'")
    try:
        return cls._from_state(params, meta, arrays)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"{path}: invalid {name} model ({exc})") from exc
