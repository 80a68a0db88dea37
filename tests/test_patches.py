"""Patch databases on the real CBCL files (npz and the PNG tar), augmentation, negative sampling."""

import tarfile

import numpy as np
import pytest

from facedet.imageio import ImageError, read_grey
from facedet.patches import (
    augment,
    find_class_folders,
    landmark_boxes,
    landmark_windows,
    load_folder,
    load_landmark_faces,
    load_npz,
    load_patches,
    read_landmarks,
    sample_windows,
    shift,
    to_window,
    warp,
)


@pytest.fixture(scope="module")
def cbcl_npz(data_dir):
    return data_dir / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz"


@pytest.fixture(scope="module")
def extracted(data_dir, tmp_path_factory):
    """The first 40 faces and 40 non-faces of the CBCL train split, extracted from the PNG tar."""
    root = tmp_path_factory.mktemp("cbcl")
    counts = {"face": 0, "non-face": 0}
    with tarfile.open(data_dir / "cbcl_face_db1" / "cbcl_face_db1_png.tar.gz") as tar:
        for m in tar:
            parts = m.name.split("/")
            if m.isfile() and len(parts) == 4 and parts[1] == "train" and counts.get(parts[2], 99) < 40:
                counts[parts[2]] += 1
                tar.extract(m, root, filter="data")
            if min(counts.values()) >= 40:
                break
    return root


def test_npz_loads_directly(cbcl_npz):
    X, y = load_npz(cbcl_npz, "train")
    assert X.shape == (6977, 19, 19) and X.dtype == np.uint8
    assert y.sum() == 2429 and (y == 0).sum() == 4548
    Xt, yt = load_npz(cbcl_npz, "test")
    assert len(Xt) == 24044 and yt.sum() == 472


def test_extracted_tar_loads_and_matches_npz(extracted, cbcl_npz):
    face_dir, nonface_dir = find_class_folders(extracted, "train")
    assert face_dir.name == "face" and nonface_dir.name == "non-face"
    X, y = load_patches(data=extracted, split="train")
    assert X.shape == (80, 19, 19) and y.sum() == 40
    d = np.load(cbcl_npz)
    names = list(d["names_train"])
    for path in sorted(face_dir.iterdir())[:5]:
        i = names.index(f"train/face/{path.stem}")
        np.testing.assert_array_equal(read_grey(path), d["X_train"][i])


def test_folders_of_any_size_are_resized(tmp_path, data_dir):
    from facedet.imageio import write_image

    faces, nonfaces = tmp_path / "f", tmp_path / "n"
    faces.mkdir(), nonfaces.mkdir()
    astro = read_grey(data_dir / "misc_faces_skimage" / "astronaut.png")
    write_image(faces / "a.png", astro[90:180, 180:270])
    write_image(faces / "b.jpg", astro[80:190, 170:280])
    write_image(nonfaces / "c.png", astro[300:500, 0:150])
    (nonfaces / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    errors = []
    X, y = load_patches(faces, nonfaces, errors=errors)
    assert X.shape == (3, 19, 19) and list(y) == [1, 1, 0]
    assert len(errors) == 1 and errors[0][0].name == "broken.png"
    assert isinstance(errors[0][1], ImageError) and "broken.png: " in str(errors[0][1])  # the exception itself
    with pytest.raises(ImageError):
        load_folder(nonfaces)
    # max_pixels reaches every file: a.png is 90x90 = 8,100 pixels, b.jpg 110x110, c.png 150x200
    errors = []
    assert load_folder(faces, errors, max_pixels=12099).shape == (1, 19, 19)
    assert [p.name for p, _ in errors] == ["b.jpg"]
    assert str(errors[0][1]).endswith(
        "b.jpg: 110x110 = 12,100 pixels exceeds the limit of 12,099 (refused before "
        "decoding: a possible decompression bomb); max_pixels= raises it"
    )
    errors = []
    with pytest.raises(ValueError, match="no readable images"):
        load_patches(faces, nonfaces, errors=errors, max_pixels=29999)
    assert sorted(p.name for p, _ in errors) == ["broken.png", "c.png"]  # (c.png: 150x200 = 30,000 pixels)


def test_npz_errors(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, X=np.zeros((3, 19, 19), np.uint8), y=np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="labels"):
        load_npz(bad)
    with pytest.raises(ValueError, match="not found"):
        load_npz(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"junk")
    with pytest.raises(ValueError):
        load_npz(tmp_path / "junk.npz")


def test_augment_mirror_and_shifts(cbcl_npz):
    X, y = load_npz(cbcl_npz)
    faces = X[:10]
    A = augment(faces, mirror=True, shifts=1)
    assert A.shape == (10 * 2 * 5, 19, 19)
    np.testing.assert_array_equal(A[:10], faces)
    np.testing.assert_array_equal(A[10:20], faces[:, :, ::-1])
    s = shift(faces, 1, 0)
    np.testing.assert_array_equal(s[:, 1:], faces[:, :-1])
    np.testing.assert_array_equal(s[:, 0], faces[:, 0])  # edge replicated
    W = augment(faces, mirror=False, shifts=0, angles=(10,), scales=(1.1,))
    assert W.shape == (30, 19, 19) and not np.array_equal(W[10:20], faces)


def test_sample_windows_from_face_free_image(data_dir):
    g = read_grey(data_dir / "nonface_scenes" / "skimage" / "coffee.png")
    assert sample_windows(g, 0, np.random.default_rng(0)).shape == (0, 19, 19)
    with pytest.raises(ValueError, match="n: must be >= 0"):
        sample_windows(g, -3, np.random.default_rng(0))
    w = sample_windows(g, 50, np.random.default_rng(0))
    assert w.shape == (50, 19, 19) and w.dtype == np.uint8 and w.std() > 0
    assert to_window(g).shape == (19, 19)


def test_to_window_and_sample_windows_take_uint8_grey_only(data_dir):
    # a (19, 19) float was cast as is (300 -> 44, [0, 1] -> 0) and other sizes came back float64; int64, bool
    # and empty images, and min_window 0, failed inside OpenCV or numpy
    g = read_grey(data_dir / "nonface_scenes" / "skimage" / "coffee.png")
    for bad, exc in (
        (np.full((19, 19), 0.5), TypeError),
        (g.astype(float), TypeError),
        (g.astype(np.int64), TypeError),
        (g > 9, TypeError),
        (np.zeros((0, 0), np.uint8), ValueError),
        (np.zeros((30, 30, 3), np.uint8), ValueError),
    ):
        with pytest.raises(exc, match="to_window"):
            to_window(bad)
    with pytest.raises(TypeError, match="sample_windows"):
        sample_windows(g.astype(float), 3, np.random.default_rng(0))
    for m in (0, -5, np.nan):
        with pytest.raises(ValueError, match="min_window"):
            sample_windows(g, 3, np.random.default_rng(0), min_window=m)
    assert sample_windows(g[:0], 3, np.random.default_rng(0)).shape == (0, 19, 19)
    assert sample_windows(g, 3, np.random.default_rng(0), min_window=1).shape == (3, 19, 19)


def test_warp_zooms_and_rotates_about_the_centre():
    # a linear ramp: zooming by z about the centre c maps value v(x) = x to c + (x - c) / z, exactly
    # (bilinear interpolation is exact on a linear ramp) away from the replicated border
    ramp = np.tile(np.arange(19, dtype=np.uint8) * 10, (1, 19, 1))
    z = warp(ramp, scale=1.25)[0].astype(float)
    x = np.arange(19)
    inner = slice(3, 16)
    np.testing.assert_allclose(z[:, inner], np.tile(10 * (9 + (x[inner] - 9) / 1.25), (19, 1)), atol=0.51)
    assert z[9, 9] == ramp[0, 9, 9]
    # +90 degrees is counter-clockwise (cv2.getRotationMatrix2D): the left-to-right ramp runs bottom to top
    r = warp(ramp, angle=90)[0]
    np.testing.assert_array_equal(r[:, 9], ramp[0, 9, ::-1])
    assert np.ptp(r[9, :]) == 0


def test_augment_counts_and_order(cbcl_npz):
    X, _ = load_npz(cbcl_npz)
    faces = X[:7]
    A = augment(faces, mirror=True, shifts=1, angles=(-10, 10), scales=(0.9, 1.1))
    assert A.shape == (7 * 2 * (1 + 4 + 2 + 2), 19, 19) and A.dtype == np.uint8
    np.testing.assert_array_equal(A[-7:], warp(faces[:, :, ::-1], scale=1.1))


def test_augmentation_refuses_bad_arguments(cbcl_npz):
    w = load_npz(cbcl_npz, "train")[0][:3]
    for call, exc in (
        (lambda: shift(w, 0.5, 0), TypeError),
        (lambda: shift(w[0], 1, 1), ValueError),
        (lambda: augment(np.zeros((2, 20, 20), np.uint8)), ValueError),
        (lambda: augment(w, shifts=-1), ValueError),
        (lambda: warp(w, 0, 0.0), ValueError),
        (lambda: warp(w, np.nan, 1.0), ValueError),
    ):
        with pytest.raises(exc):
            call()


def test_image_files_follows_symlinked_folders_once_and_lists_broken_links(data_dir, tmp_path):
    from facedet.patches import image_files

    photos = tmp_path / "photos"
    (photos / "sub").mkdir(parents=True)
    astro = data_dir / "misc_faces_skimage" / "astronaut.png"
    (photos / "a.jfif").write_bytes(b"")  # listed by suffix; reading reports what it holds
    (photos / ".hidden.png").symlink_to(astro)
    (photos / "sub" / "b.PNG").symlink_to(astro)
    (photos / "gone.jpg").symlink_to(tmp_path / "missing.jpg")
    (photos / "notes.txt").write_text("not an image")
    (photos / "linked").symlink_to(data_dir / "misc_faces_skimage")  # a symlinked folder is followed
    (photos / "sub" / "loop").symlink_to(photos)  # and a loop ends
    names = [p.relative_to(photos).as_posix() for p in image_files(photos, recursive=True)]
    assert names == ["a.jfif", "gone.jpg", "linked/astronaut.png", "sub/b.PNG"]
    assert [p.name for p in image_files(photos)] == ["a.jfif", "gone.jpg"]


def test_augment_takes_uint8_windows_only_and_any_count(cbcl_npz):
    X = np.load(cbcl_npz)["X_train"][:3]
    assert augment(X[:0], angles=(10,)).shape == (0, 19, 19)
    np.testing.assert_array_equal(augment(X, mirror=False, shifts=0, angles=10), augment(X, False, 0, (10,)))
    for bad in (X > 100, X.astype(np.int64)):  # OpenCV's warps refused these with their own messages
        with pytest.raises(TypeError, match="windows: expected uint8"):
            augment(bad, angles=(5,))


# --- faces cut by their landmarks (caltech_webfaces) ----------------------------------------------------

FRAMING = (0.048, 0.039, 1.571)


@pytest.fixture(scope="module")
def webfaces(data_dir):
    return data_dir / "caltech_webfaces"


def test_landmark_boxes_are_the_data_sets_derived_boxes(webfaces):
    """The box formula reproduces boxes.csv (derived from the same points, one decimal) for every face."""
    import csv

    points = read_landmarks(webfaces / "landmarks.csv")
    assert sum(len(p) for p in points.values()) == 10524 and len(points) == 7092
    rows = list(csv.DictReader(open(webfaces / "boxes.csv")))
    ours = np.concatenate([landmark_boxes(p) for p in points.values()])
    order = {}
    for r in rows:  # the same image order, faces in file order within an image
        order.setdefault(r["image"], []).append([float(r[c]) for c in "xywh"])
    theirs = np.concatenate([np.array(order[name]) for name in points])
    assert np.abs(ours - theirs).max() <= 0.051
    val = read_landmarks(webfaces / "landmarks.csv", split="val")
    assert sum(len(p) for p in val.values()) == sum(r["split"] == "val" for r in rows)
    assert all(int(n[3:8]) % 5 == 0 for n in val)


def test_landmark_windows_frame_the_face_as_the_box_map_says(webfaces):
    points = read_landmarks(webfaces / "landmarks.csv", split="val")
    name, p = next((n, p) for n, p in points.items() if len(p) == 1 and landmark_boxes(p)[0, 2] > 60)
    grey = read_grey(webfaces / "images" / name)
    dx, dy, k = FRAMING
    w, wp = landmark_windows(grey, np.repeat(p, 3, 0), FRAMING, tilt=[0.0, 15.0, np.nan])
    assert w.shape == (3, 19, 19) and w.dtype == np.uint8
    eyes, mouth = (wp[:, 0] + wp[:, 1]) / 2, wp[:, 2]
    # upright: eyes level, and the box centre E + 0.433 (M - E) sits at the window centre + the map's offset
    assert abs(wp[0, 0, 1] - wp[0, 1, 1]) < 1e-9
    np.testing.assert_allclose(eyes[0] + 0.433 * (mouth[0] - eyes[0]), [9 + 19 * dx, 9 + 19 * dy], atol=1e-6)
    # the box's side (1.281 eye distance + 1.003 eye-mouth) is k windows
    side = 1.281 * np.hypot(*(wp[:, 1] - wp[:, 0]).T) + 1.003 * np.hypot(*(mouth - eyes).T)
    np.testing.assert_allclose(side, 19 * k, rtol=1e-9)
    tilt = np.degrees(np.arctan2(wp[:, 1, 1] - wp[:, 0, 1], wp[:, 1, 0] - wp[:, 0, 0]))
    roll = np.degrees(np.arctan2(p[0, 1, 1] - p[0, 0, 1], p[0, 1, 0] - p[0, 0, 0]))
    np.testing.assert_allclose(tilt, [0.0, 15.0, roll], atol=1e-6)
    # the photo's own tilt is an axis-aligned window: the INTER_AREA shrink of the square it covers
    s = landmark_boxes(p)[0, 2] / k
    c = (
        landmark_boxes(p)[0, :2]
        + landmark_boxes(p)[0, 2] / 2
        - s
        * np.array([dx, dy])
        @ np.array(
            [
                [np.cos(np.radians(roll)), np.sin(np.radians(roll))],
                [-np.sin(np.radians(roll)), np.cos(np.radians(roll))],
            ]
        )
    )
    x0, y0 = np.rint(c - s / 2).astype(int)
    direct = to_window(grey[y0 : y0 + int(round(s)), x0 : x0 + int(round(s))])
    assert np.abs(direct.astype(int) - w[2]).mean() < 8


def test_load_landmark_faces_counts_mirrors_and_reports_bad_images(webfaces, tmp_path):
    lines = open(webfaces / "landmarks.csv").read().splitlines()
    header, rows = lines[0], [r for r in lines[1:] if r.startswith("val,")][:30]
    csv_path = tmp_path / "points.csv"
    csv_path.write_text("\n".join([header, *rows, "val,missing.jpg,1,1,5,1,3,3,3,5"]) + "\n")
    names = sorted({r.split(",")[1] for r in rows})
    for n in names:
        (tmp_path / n).symlink_to(webfaces / "images" / n)
    errors = []
    w, wp, face = load_landmark_faces(csv_path, tmp_path, FRAMING, rotations=2, errors=errors)
    assert [str(p.name) for p, _ in errors] == ["missing.jpg"]
    n_faces = face.max() + 1
    assert len(w) == n_faces * 3 * 2 and np.array_equal(np.bincount(face), np.full(n_faces, 6))
    assert 20 <= n_faces <= 30  # faces under 20 px or leaving their image are skipped
    np.testing.assert_array_equal(w[1::2], w[0::2, :, ::-1])  # each window, then its mirror image
    np.testing.assert_allclose(wp[1::2, 0, 0], 18 - wp[0::2, 1, 0])  # the mirrored left eye is the right one
    again, _, _ = load_landmark_faces(csv_path, tmp_path, FRAMING, rotations=2, errors=[])
    np.testing.assert_array_equal(w, again)  # seeded
    with pytest.raises(ImageError):
        load_landmark_faces(csv_path, tmp_path, FRAMING)


@pytest.mark.parametrize(
    "text, message",
    [
        ("image,left_eye_x,left_eye_y\na.jpg,1,2\n", "missing column"),
        ("image,left_eye_x,left_eye_y,right_eye_x,right_eye_y,mouth_x,mouth_y\na.jpg,1,2,3,x,5,6\n", "line 2"),
        ("image,left_eye_x,left_eye_y,right_eye_x,right_eye_y,mouth_x,mouth_y\na.jpg,1,2,3,nan,5,6\n", "finite"),
        ("image,left_eye_x,left_eye_y,right_eye_x,right_eye_y,mouth_x,mouth_y\n", "no faces"),
    ],
)
def test_read_landmarks_refuses_bad_files(tmp_path, text, message):
    path = tmp_path / "p.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        read_landmarks(path)
