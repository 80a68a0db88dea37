"""Model files: one ``.npz`` archive holding the arrays plus a JSON header, never pickle.

Layout: ``__header__`` is a uint8 array holding UTF-8 JSON
``{"format": "svmcore-model", "format_version": 1, "class": name, "params": {...}, "meta": {...}}``;
every other entry is a learned numeric array. A learned array that is a scipy.sparse matrix (``support_vectors_``
of a kernel model fitted on CSR rows), and a one-vs-one ``dual_coef_`` with under a tenth of its entries nonzero
(which loads dense), is stored as its CSR parts, four arrays named ``<name>.data`` (float64, the nonzero values
row by row), ``<name>.indices`` (integers, their columns, sorted within each row),
``<name>.indptr`` (integers, n_rows + 1 offsets into the other two) and ``<name>.shape`` (int64, (n_rows,
n_columns)), scipy's CSR layout (``np.savez`` and ``np.load`` keep the dotted names). Loading checks the parts
(:func:`join_sparse`) before scipy sees them. A dense array under ``<name>`` (files written before sparse
support vectors, or of dense input) loads as before; a reader from before this layout refuses a file that uses
it ("unknown arrays"), so ``format_version`` stays 1. The header is standard JSON (no NaN or Infinity tokens): a
non-finite float, such as PmSVM's p = -inf, is written as ``{"__float__": "-inf"}``. Files are written to a
temporary file in the target folder and renamed into place, so a crash never leaves a half-written model.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import Any, BinaryIO, Protocol, TypeVar

    _Class = TypeVar("_Class", bound=type)

    class _Estimator(Protocol):
        """An svmcore estimator (:class:`svmcore.base.BaseEstimator`, whose module imports this one)."""

        def _get_state(self) -> tuple[dict, dict, dict]: ...


FORMAT_VERSION = 1
_REGISTRY: dict[str, type] = {}


def register(cls: _Class) -> _Class:
    """Class decorator: make ``cls`` loadable by :func:`load` under its class name."""
    _REGISTRY[cls.__name__] = cls
    return cls


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, overwrite: bool = True) -> Iterator[BinaryIO]:
    """Context manager yielding a binary file whose content replaces ``path`` only on success.

    Writes to a temporary file in the target's folder, fsyncs, then moves it into place
    (:func:`move_into_place`); on any exception (SIGTERM too, where the program turns it into one, as the
    ``facedet`` command does) the temporary file is removed and ``path`` is left untouched. The file gets the
    permission bits of the file it replaces, or 0666 & ~umask if new. ``overwrite=False``: FileExistsError if
    ``path`` exists when the file is complete (another process wrote it meanwhile), and the file is not replaced.
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
        move_into_place(tmp, path, overwrite)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def move_into_place(tmp: str | os.PathLike, path: str | os.PathLike, overwrite: bool = True) -> None:
    """Rename the complete file ``tmp`` to ``path`` in one step (same folder), so that readers see the old file
    or the new one, never a part.

    ``overwrite=True``: ``os.replace``. ``overwrite=False``: a hard link that fails if ``path`` exists, so two
    processes writing the same name cannot replace each other's file (FileExistsError, ``tmp`` left to the
    caller); where the file system has no hard links, ``path`` is first claimed by an exclusive create.
    """
    if overwrite:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise FileExistsError(f"{path}: exists and was not replaced") from None
    except OSError:  # no hard links here (FAT, some network file systems)
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            raise FileExistsError(f"{path}: exists and was not replaced") from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


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


SPARSE_PARTS = ("data", "indices", "indptr", "shape")


def split_sparse(arrays: dict) -> dict:
    """``arrays`` (name -> array) with each scipy.sparse matrix replaced by its CSR parts (module docstring), in
    canonical form (sorted indices, no duplicates)."""
    out = {}
    for name, a in arrays.items():
        if not sp.issparse(a):
            out[name] = a
            continue
        a = sp.csr_matrix(a)
        if not a.has_canonical_format:
            a = a.copy()
            a.sum_duplicates()
        out.update(
            {
                f"{name}.data": a.data,
                f"{name}.indices": a.indices,
                f"{name}.indptr": a.indptr,
                f"{name}.shape": np.array(a.shape, dtype=np.int64),
            }
        )
    return out


def join_sparse(arrays: dict, names: Iterable[str]) -> dict:
    """``arrays`` as read, with the CSR parts of each array in ``names`` joined into one CSR matrix (float64).

    Parts of other names are left as they are (the caller refuses them as unknown arrays). Raises ValueError if
    parts are missing, the array is also stored dense, or the parts do not make a canonical CSR matrix: wrong
    dtypes or dimensions, indptr not rising from 0 to the number of entries, column indices outside the shape,
    unsorted or repeated within a row. These are checked before scipy sees them: its constructor checks little, and
    a product with a column index beyond the shape crashes the process (scipy 1.17: segmentation fault)."""
    out = dict(arrays)
    for name in names:
        keys = [f"{name}.{part}" for part in SPARSE_PARTS]
        if not any(k in arrays for k in keys):
            continue
        missing = [k for k in keys if k not in arrays]
        if missing:
            raise ValueError(f"sparse array {name!r}: missing {missing}")
        if name in arrays:
            raise ValueError(f"array {name!r} is stored both dense and sparse")
        out[name] = _csr_from_parts(name, *(out.pop(k) for k in keys))
    return out


def _csr_from_parts(name, data, indices, indptr, shape):
    def bad(why):
        return ValueError(f"sparse array {name!r}: {why}")

    if (
        shape.shape != (2,)
        or shape.dtype.kind not in "iu"
        or not all(0 <= int(v) <= np.iinfo(np.int64).max for v in shape)
    ):
        got = shape.tolist() if shape.size <= 4 else shape.shape
        raise bad(f"shape must be 2 integers >= 0, got {shape.dtype} {got}")
    n, d = (int(v) for v in shape)
    for part, a, kinds in (("data", data, "f"), ("indices", indices, "iu"), ("indptr", indptr, "iu")):
        if a.ndim != 1 or a.dtype.kind not in kinds:
            raise bad(
                f"{part} must be a 1-D array of {'floats' if kinds == 'f' else 'integers'}, got {a.dtype} {a.shape}"
            )
    if indptr.size != n + 1:
        raise bad(f"indptr has {indptr.size} entries for {n} rows; expected {n + 1}")
    ptr, cols = indptr.astype(np.int64), indices.astype(np.int64)  # (uint64 beyond int64 wraps negative: refused)
    if data.size != cols.size:
        raise bad(f"{data.size} values for {cols.size} column indices")
    if ptr[0] != 0 or ptr[-1] != cols.size or np.any(np.diff(ptr) < 0):
        raise bad(f"indptr must rise from 0 to the number of entries ({cols.size}) without falling")
    if cols.size and (cols.min() < 0 or cols.max() >= d):
        raise bad(f"column indices must lie in [0, {d}), got {cols.min()} to {cols.max()}")
    M = sp.csr_matrix((data.astype(np.float64), cols, ptr), shape=(n, d))
    if not M.has_canonical_format:
        raise bad("column indices must be sorted and distinct within each row")
    return M


def write_archive(path: str | os.PathLike, header: dict, arrays: dict) -> Path:
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


MAX_HEADER_BYTES = 1 << 20  # a model's JSON header is a few KB
MAX_EXPANSION = 100  # deflate reaches 1032:1 on degenerate data only; np.savez stores members uncompressed
MAX_SMALL_MEMBER = 1 << 20  # a small member may expand more (CBCL's compressed labels: 192 times)
MAX_MEMBERS = 1_000


def regular_file_size(path: str | os.PathLike, what: str = "file") -> int:
    """The size in bytes of ``path``, which must be a regular file (symlinks followed): a FIFO would block the
    reader, a device (``/dev/zero``) never end.

    Raises FileNotFoundError if it does not exist, IsADirectoryError for a folder and ValueError for a FIFO,
    device or socket or a path that cannot be examined (permission, a symlink loop); messages name ``path`` and
    ``what`` it should be.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} not found: {os.fspath(path)}") from None
    except OSError as exc:
        raise ValueError(f"{os.fspath(path)}: cannot read the {what} ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"{os.fspath(path)}: is a folder, not a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{os.fspath(path)}: a pipe, device or socket, not a regular file")
    return st.st_size


class NpzReader:
    """An ``.npz`` archive opened under the project's reading policy: no array is read before every member is
    checked from the archive's directory and its ``.npy`` header.

    Refused (ValueError naming the file and the member): a path that is not a regular file, not a zip archive,
    more than ``MAX_MEMBERS`` members, a member that is not ``<name>.npy`` or whose ``.npy`` header is bad, an object
    dtype (pickle), a header whose shape and dtype do not give the member's size in the directory (a header that
    claims 10**12 values in a 110 KB file), a stored member larger than the archive, or a compressed member over
    ``MAX_SMALL_MEMBER`` bytes that expands more than ``MAX_EXPANSION`` times (a deflate bomb). :meth:`read` then
    takes the member's declared size, at most ``MAX_EXPANSION`` times its compressed size (or ``MAX_SMALL_MEMBER``):
    callers check names, shapes and dtypes (:attr:`members`: name -> (shape, dtype)) before they read.
    FileNotFoundError if ``path`` does not exist.

    Parameters
    ----------
    path : str or os.PathLike
        The archive.
    what : str
        What the file is, for messages ("model file", "patch file").
    """

    def __init__(self, path: str | os.PathLike, what: str = "file") -> None:
        self.path = Path(path)
        self.what = what
        try:
            size = regular_file_size(self.path, what)
        except IsADirectoryError as exc:
            raise ValueError(str(exc)) from None
        try:
            self._zip = zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            # (np.load would also take a bare .npy array or, unsafely, a pickle)
            raise ValueError(f"{self.path}: not a {what} (not an .npz archive)") from exc
        try:
            self.members = self._check_members(size)
        except BaseException:
            self._zip.close()
            raise

    def _bad(self, why):
        return ValueError(f"{self.path}: not a valid {self.what} ({why})")

    def _check_members(self, archive_bytes):
        infos = self._zip.infolist()
        if len(infos) > MAX_MEMBERS:
            raise self._bad(f"{len(infos)} members, at most {MAX_MEMBERS}")
        members = {}
        for info in infos:
            name = info.filename[:-4] if info.filename.endswith(".npy") else None
            if not name or name in members:
                raise self._bad(f"member {info.filename!r} is not one .npy array")
            if info.compress_type == zipfile.ZIP_STORED:
                if info.file_size != info.compress_size or info.compress_size > archive_bytes:
                    raise self._bad(
                        f"member {info.filename!r} claims {info.file_size} bytes in a {archive_bytes}-byte file"
                    )
            elif info.file_size > max(MAX_EXPANSION * info.compress_size, MAX_SMALL_MEMBER):
                raise self._bad(
                    f"member {info.filename!r} expands {info.compress_size} bytes to {info.file_size}, "
                    f"more than {MAX_EXPANSION} times"
                )
            try:
                with self._zip.open(info) as f:
                    version = np.lib.format.read_magic(f)
                    read_header = {
                        (1, 0): np.lib.format.read_array_header_1_0,
                        (2, 0): np.lib.format.read_array_header_2_0,
                    }.get(version)
                    if read_header is None:
                        raise ValueError(f".npy version {version}")
                    shape, fortran, dtype = read_header(f)
                    offset = f.tell()
            except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
                raise self._bad(f"member {info.filename!r} is not a .npy array: {exc}") from exc
            if dtype.hasobject:
                raise self._bad(f"array {name!r} has dtype object, which would need pickle")
            nbytes = math.prod(shape) * dtype.itemsize
            if offset + nbytes != info.file_size:
                raise self._bad(
                    f"array {name!r}: its header claims {shape} {dtype} ({nbytes} bytes), the archive "
                    f"holds {info.file_size - offset}"
                )
            members[name] = (tuple(shape), dtype)
        return members

    def read(self, name: str) -> np.ndarray:
        """The array ``name`` (a key of :attr:`members`, which gives its shape and dtype); ValueError if its data
        are corrupt (a CRC error, a truncated member)."""
        try:
            with self._zip.open(f"{name}.npy") as f:
                return np.lib.format.read_array(f, allow_pickle=False)
        except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
            raise self._bad(f"array {name!r}: {exc}") from exc

    def close(self) -> None:
        self._zip.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_HEADER_FIELDS = {"format", "format_version", "class", "params", "meta"}  # what save writes


def read_archive(
    path: str | os.PathLike,
    expected_format: str,
    array_names: Callable[[dict], Iterable[str]] | None = None,
    what: str = "model",
) -> tuple[dict, dict]:
    """Read an archive written by :func:`write_archive`; return ``(header, arrays)``.

    The JSON header is read first; ``array_names(header)``, if given, returns the names of the arrays such a
    file may hold (raising ValueError for a bad header), and an archive holding others is refused before any array
    is read; ``what`` names such a file in the messages of these two checks. Raises FileNotFoundError if ``path``
    does not exist and ValueError if it is not such an archive (:class:`NpzReader`'s policy; no header, a header over
    ``MAX_HEADER_BYTES`` or not JSON, another format, a newer format version, unknown arrays).
    """
    with NpzReader(path, "model file") as npz:
        spec = npz.members.get("__header__")
        if spec is None:
            raise ValueError(f"{path}: not a model file of this project (no header)")
        if spec[1] != np.uint8 or len(spec[0]) != 1 or spec[0][0] > MAX_HEADER_BYTES:
            raise ValueError(
                f"{path}: the model header must be at most {MAX_HEADER_BYTES} bytes of text, got {spec[0]} {spec[1]}"
            )
        try:
            # (older files: -Infinity)
            header = json.loads(npz.read("__header__").tobytes().decode("utf-8"), object_hook=_decode)
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:  # (deeply nested brackets recurse)
            raise ValueError(f"{path}: model header is not valid JSON ({exc})") from exc
        if not isinstance(header, dict) or header.get("format") != expected_format:
            raise ValueError(
                f"{path}: not a {expected_format} file "
                f"(format={header.get('format') if isinstance(header, dict) else None!r})"
            )
        version = header.get("format_version")
        if isinstance(version, bool) or not isinstance(version, int) or version > FORMAT_VERSION or version < 1:
            raise ValueError(f"{path}: unsupported format version {version!r} (this version reads {FORMAT_VERSION})")
        names = [k for k in npz.members if k != "__header__"]
        if array_names is not None:
            try:
                known = set(array_names(header))
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{path}: invalid {what} ({exc})") from exc
            unknown = sorted(set(names) - known)
            if unknown:
                raise ValueError(f"{path}: invalid {what} (unknown arrays {unknown})")
        return header, {k: npz.read(k) for k in names}


def registered_class(name: object) -> type:
    """The estimator class registered under ``name`` (:func:`register`); ValueError if none is."""
    cls = _REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"unknown model class {name!r}; known: {sorted(_REGISTRY)}")
    return cls


def get_state(estimator: _Estimator) -> tuple[dict, dict, dict]:
    """What a file holds of a fitted estimator: ``(params, meta, arrays)``, its hyperparameters (JSON values), its
    learned scalars and its learned arrays (numeric; a CSR matrix split into ``<name>.data``, ``.indices``,
    ``.indptr``, ``.shape``). Checked by building the model :func:`from_state` would build from them, so a
    state that loading would refuse is never written.

    Raises
    ------
    svmcore.NotFittedError
        The estimator is not fitted.
    ValueError
        Its learned attributes are inconsistent.
    """
    return estimator._get_state()


def from_state(class_name: str, params: dict, meta: dict, arrays: dict) -> Any:
    """The estimator of class ``class_name`` (a registered svmcore class) with the state :func:`get_state` gave.

    Raises
    ------
    ValueError
        Unknown class, unknown or missing parameters, arrays or values, invalid hyperparameters.
    KeyError
        A learned array or value is missing.
    """
    return registered_class(class_name)._from_state(params, meta, arrays)


def file_arrays(class_name: str) -> list[str]:
    """The array names a file of the registered class ``class_name`` may hold (ValueError for an unknown class)."""
    return registered_class(class_name)._file_arrays()


def save(estimator: _Estimator, path: str | os.PathLike) -> Path:
    """Save a fitted svmcore estimator to ``path`` (see the module docstring for the format)."""
    params, meta, arrays = get_state(estimator)
    header = {
        "format": "svmcore-model",
        "format_version": FORMAT_VERSION,
        "class": type(estimator).__name__,
        "params": params,
        "meta": meta,
    }
    return write_archive(path, header, arrays)


def load(path: str | os.PathLike) -> Any:
    """Load an estimator saved by ``estimator.save(path)``.

    Raises FileNotFoundError for a missing file and ValueError for a corrupt, foreign or inconsistent
    file (not an .npz, unknown class, missing or unknown parameters, arrays or values, mis-typed or
    mis-shaped arrays, invalid hyperparameters or learned values). Never unpickles.
    """

    def array_names(header):
        unknown = sorted(set(header) - _HEADER_FIELDS)
        if unknown:  # (an edited header: what would the fields mean?)
            raise ValueError(f"unknown header fields {unknown}")
        return file_arrays(header.get("class"))

    header, arrays = read_archive(path, "svmcore-model", array_names, "svmcore model")
    name = header["class"]
    params = header.get("params")
    meta = header.get("meta")
    if not isinstance(params, dict) or not isinstance(meta, dict):
        raise ValueError(f"{path}: header lacks 'params' or 'meta'")
    try:
        return from_state(name, params, meta, arrays)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"{path}: invalid {name} model ({exc})") from exc
