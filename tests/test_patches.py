"""Patch databases on the real CBCL files (npz and the PNG tar), augmentation, negative sampling."""
import tarfile

import numpy as np
import pytest

from facedet.imageio import ImageError, read_grey
from facedet.patches import augment, find_class_folders, load_folder, load_npz, load_patches, sample_windows, shift, warp, \
    to_window


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
    assert str(errors[0][1]).endswith("b.jpg: 110x110 = 12,100 pixels exceeds the limit of 12,099 (refused before "
                                      "decoding: a possible decompression bomb); max_pixels= raises it")
    errors = []
    with pytest.raises(ValueError, match="no readable images"):
        load_patches(faces, nonfaces, errors=errors, max_pixels=29999)
    assert sorted(p.name for p, _ in errors) == ["broken.png", "c.png"]  # (c.png: 150x200 = 30,000 pixels)


def test_npz_errors(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, X=np.zeros((3, 19, 19), np.uint8), y=np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="labels"):
        load_npz(bad)
    with pytest.raises(ValueError, match="not a file"):
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
    for bad, exc in ((np.full((19, 19), 0.5), TypeError), (g.astype(float), TypeError),
                     (g.astype(np.int64), TypeError), (g > 9, TypeError),
                     (np.zeros((0, 0), np.uint8), ValueError), (np.zeros((30, 30, 3), np.uint8), ValueError)):
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
    for call, exc in ((lambda: shift(w, 0.5, 0), TypeError), (lambda: shift(w[0], 1, 1), ValueError),
                      (lambda: augment(np.zeros((2, 20, 20), np.uint8)), ValueError),
                      (lambda: augment(w, shifts=-1), ValueError), (lambda: warp(w, 0, 0.0), ValueError),
                      (lambda: warp(w, np.nan, 1.0), ValueError)):
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
