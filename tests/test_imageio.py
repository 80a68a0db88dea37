"""facedet.imageio on real photos and on bad or unusual files derived from them."""

import io
import zlib

import numpy as np
import pytest
from PIL import Image

from facedet.imageio import MAX_PIXELS, ImageError, ImageTooLarge, read_grey, read_rgb, write_image


@pytest.fixture(scope="module")
def astronaut(data_dir):
    return data_dir / "misc_faces_skimage" / "astronaut.png"


@pytest.fixture(scope="module")
def scene_jpeg(data_dir):
    return data_dir / "scenes_annotated_dlib_voc" / "images" / "2008_002470.jpg"


def bt601(rgb):
    return rgb.astype(float) @ [0.299, 0.587, 0.114]


def test_real_rgb_png_and_jpeg(astronaut, scene_jpeg):
    rgb = read_rgb(astronaut)
    assert rgb.shape == (512, 512, 3) and rgb.dtype == np.uint8 and rgb.flags.c_contiguous
    grey = read_grey(astronaut)
    assert grey.shape == (512, 512) and grey.dtype == np.uint8
    assert np.abs(grey - bt601(rgb)).max() <= 1.0
    assert read_grey(scene_jpeg).shape == (332, 500)
    assert read_rgb(scene_jpeg).shape == (332, 500, 3)


def test_real_grey_png_replicated_to_rgb(data_dir):
    path = data_dir / "nonface_scenes" / "skimage" / "moon.png"
    grey = read_grey(path)
    rgb = read_rgb(path)
    assert grey.shape == (512, 512)
    np.testing.assert_array_equal(rgb, np.repeat(grey[:, :, None], 3, axis=2))


def test_real_rgba_png_composited_over_white(data_dir, tmp_path):
    path = data_dir / "nonface_scenes" / "skimage" / "horse.png"
    raw = np.asarray(Image.open(path))
    assert raw.shape[2] == 4
    rgb = read_rgb(path)
    a = raw[..., 3:4] / 255.0
    expected = raw[..., :3] * a + 255 * (1 - a)
    assert np.abs(rgb - expected).max() <= 1.0
    assert np.abs(read_grey(path) - bt601(rgb)).max() <= 1.0
    # the colour hidden under fully transparent pixels must not show through
    hidden = raw.copy()
    clear = hidden[..., 3] == 110
    assert clear.any()
    hidden[clear, 3] = 0
    hidden[clear, :3] = 0
    Image.fromarray(hidden).save(tmp_path / "hidden.png")
    assert (read_rgb(tmp_path / "hidden.png")[clear] == 255).all()


def test_sixteen_bit_grey_scaled(tmp_path, astronaut):
    grey = read_grey(astronaut)
    wide = grey.astype(np.uint16) * 257  # exact 8 -> 16 bit expansion
    for suffix in (".png", ".tif"):
        path = tmp_path / f"g16{suffix}"
        Image.fromarray(wide).save(path)
        assert Image.open(path).mode.startswith("I")
        np.testing.assert_array_equal(read_grey(path), grey)
        np.testing.assert_array_equal(read_rgb(path)[..., 1], grey)
    # PGM with maxval 65535 opens as mode "I"; odd values round to nearest
    path = tmp_path / "g16.pgm"
    values = np.array([[0, 128, 129, 65535]], dtype=">u2")
    path.write_bytes(b"P5\n4 1\n65535\n" + values.tobytes())
    np.testing.assert_array_equal(read_grey(path), [[0, 0, 1, 255]])


def test_palette_cmyk_and_bilevel(tmp_path, astronaut):
    rgb = read_rgb(astronaut)
    im = Image.fromarray(rgb)
    pal = tmp_path / "pal.png"
    im.quantize(64).save(pal)
    assert Image.open(pal).mode == "P"
    assert np.abs(read_rgb(pal).astype(int) - rgb).mean() < 10
    # palette with a transparent index: that colour becomes white
    p = im.quantize(16)
    p.info["transparency"] = 0
    pt = tmp_path / "pal_t.png"
    p.save(pt, transparency=0)
    idx = np.asarray(Image.open(pt))
    out = read_rgb(pt)
    assert (idx == 0).any() and (out[idx == 0] == 255).all()
    cmyk = tmp_path / "cmyk.jpg"
    im.convert("CMYK").save(cmyk, quality=95)
    assert Image.open(cmyk).mode == "CMYK"
    assert np.abs(read_rgb(cmyk).astype(int) - rgb).mean() < 8
    bilevel = tmp_path / "bw.png"
    im.convert("1").save(bilevel)
    assert set(np.unique(read_grey(bilevel))) <= {0, 255}


def test_exif_orientation_applied(tmp_path, astronaut):
    rgb = read_rgb(astronaut)[:, :300]  # not square, so a missed rotation changes the shape
    path = tmp_path / "rot.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6  # stored image must be rotated 90 degrees clockwise to display
    Image.fromarray(rgb).save(path, exif=exif, quality=95)
    out = read_rgb(path)
    assert out.shape == (300, 512, 3)
    assert np.abs(out.astype(int) - np.rot90(rgb, k=-1)).mean() < 3


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_truncated_files(tmp_path, scene_jpeg, astronaut, cut):
    for src in (scene_jpeg, astronaut):
        data = src.read_bytes()
        path = tmp_path / f"cut{src.suffix}"
        path.write_bytes(data[: int(len(data) * cut)])
        with pytest.raises(ImageError, match=r"cut\.(jpg|png).*truncated or corrupt"):
            read_grey(path)


def test_missing_directory_nonimage_empty(tmp_path):
    with pytest.raises(ImageError, match="nope.png: file not found"):
        read_grey(tmp_path / "nope.png")
    with pytest.raises(ImageError, match="is a directory"):
        read_rgb(tmp_path)
    text = tmp_path / "notes.jpg"
    text.write_text("this is not an image\n")
    with pytest.raises(ImageError, match="notes.jpg: not an image"):
        read_grey(text)
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    with pytest.raises(ImageError, match="empty.png"):
        read_grey(empty)
    with pytest.raises(TypeError):
        read_grey(12)


def test_a_folder_is_not_an_image(tmp_path):
    with pytest.raises(ImageError, match="is a directory"):
        read_grey(tmp_path)


def test_decompression_bomb_refused_from_header(tmp_path, grey_png):
    # 12000 x 12000 grey (144 MB decoded) in a file of a few hundred bytes: refused from the header
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(grey_png(12000, 12000, zlib.compress(b"\0" * 12001 * 8)))
    with pytest.raises(
        ImageTooLarge,
        match=r"bomb.png: 12000x12000 = 144,000,000 pixels exceeds the limit of "
        r"50,000,000 \(refused before decoding: a possible decompression bomb\); "
        r"max_pixels= raises it$",
    ):
        read_grey(bomb)
    # Beyond Pillow's own hard limit (twice Image.MAX_IMAGE_PIXELS), which refuses the file as it opens, the
    # message is ours too: the file, its pixel count and the limit, not Pillow's "DOS attack" wording
    huge = tmp_path / "huge.png"
    huge.write_bytes(grey_png(2**20, 2**20, zlib.compress(b"\0" * 64)))
    with pytest.raises(
        ImageError,
        match=r"^\S*huge.png: 1,099,511,627,776 pixels exceeds the limit of "
        r"50,000,000 \(refused before decoding: a possible decompression bomb\); "
        r"max_pixels= raises it$",
    ):
        read_rgb(huge)
    # a max_pixels above Pillow's hard limit raises it to max_pixels for the read (Pillow's refusal is at the
    # caller's limit, not at 178,956,970), and Pillow's setting is restored afterwards
    with pytest.raises(
        ImageTooLarge,
        match=r"huge.png: 1,099,511,627,776 pixels exceeds the limit of 200,000,000,000 "
        r"\(refused before decoding: a possible decompression bomb\); "
        r"max_pixels= raises it$",
    ):
        read_rgb(huge, max_pixels=2 * 10**11)
    assert Image.MAX_IMAGE_PIXELS == 89_478_485
    # just over a caller's limit, a real image is refused too; at the limit it is read
    small = tmp_path / "small.png"
    Image.new("L", (100, 50)).save(small)
    with pytest.raises(ImageError, match="exceeds the limit of 4,999"):
        read_grey(small, max_pixels=4999)
    assert read_grey(small, max_pixels=5000).shape == (50, 100)
    for bad, error in ((0, ValueError), (-1, ValueError), (2.5e8, TypeError), ("big", TypeError), (True, TypeError)):
        with pytest.raises(error, match="max_pixels"):
            read_grey(small, max_pixels=bad)


def test_the_default_limit_stays_50_megapixels(tmp_path, grey_png):
    import inspect

    from facedet import patches

    assert MAX_PIXELS == 50_000_000
    for reader in (read_grey, read_rgb, patches.load_folder, patches.load_patches):
        assert inspect.signature(reader).parameters["max_pixels"].default == 50_000_000
    over = tmp_path / "over.png"  # 10000 x 5001 in its header: 10,000 pixels over, nothing decoded
    over.write_bytes(grey_png(10000, 5001, zlib.compress(b"\0" * 64)))
    with pytest.raises(ImageTooLarge) as info:
        read_grey(over)
    exc = info.value
    assert (exc.path, exc.pixels, exc.size, exc.limit, exc.pillow) == (
        str(over),
        50_010_000,
        (10000, 5001),
        50_000_000,
        False,
    )
    assert exc.message("--max-pixels") == (
        f"{over}: 10000x5001 = 50,010,000 pixels exceeds the limit of 50,000,000 "
        "(refused before decoding: a possible decompression bomb); --max-pixels "
        "raises it"
    )
    # an exception that crosses processes (multiprocessing) keeps its fields and message
    import pickle

    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is ImageTooLarge and str(back) == str(exc) and back.size == exc.size


def test_max_pixels_above_the_default_raises_pillows_limit_for_that_read_only(tmp_path, monkeypatch):
    # Pillow refuses above twice Image.MAX_IMAGE_PIXELS (178,956,970 by default); a lowered setting stands in for
    # it here, so that a 100x50 image is beyond it
    import threading

    from PIL import Image as PILImage

    from facedet import imageio

    monkeypatch.setattr(PILImage, "MAX_IMAGE_PIXELS", 1000)
    Image.new("L", (100, 50), 7).save(tmp_path / "over.png")  # 5,000 pixels > 2 x 1,000
    (tmp_path / "cut.png").write_bytes((tmp_path / "over.png").read_bytes()[:60])
    # up to facedet's default, Pillow's setting stays in force, and the refusal says what gets past it
    with pytest.raises(
        ImageTooLarge,
        match=r"over.png: 5,000 pixels exceeds Pillow's limit of 2,000 \(twice "
        r"PIL.Image.MAX_IMAGE_PIXELS\) \(refused before decoding: a possible "
        r"decompression bomb\); max_pixels= above 50,000,000 raises it$",
    ):
        read_grey(tmp_path / "over.png", max_pixels=MAX_PIXELS)
    # above it, the caller opted in: the image is read, and Pillow's setting is restored after the read, after a
    # refusal and after a failed decoding alike
    assert read_grey(tmp_path / "over.png", max_pixels=MAX_PIXELS + 1).tolist() == [[7] * 100] * 50
    assert PILImage.MAX_IMAGE_PIXELS == 1000
    with pytest.raises(ImageError, match="cut.png: (truncated|cannot read)"):
        read_rgb(tmp_path / "cut.png", max_pixels=10**8)
    assert PILImage.MAX_IMAGE_PIXELS == 1000
    with monkeypatch.context() as m:  # a lower default, so that a limit above it can be under the image's size
        m.setattr(imageio, "MAX_PIXELS", 1000)
        with pytest.raises(ImageTooLarge, match=r"over.png: 100x50 = 5,000 pixels exceeds the limit of 4,999 "):
            read_rgb(tmp_path / "over.png", max_pixels=4999)  # Pillow let it open, our header check refused it
    assert PILImage.MAX_IMAGE_PIXELS == 1000
    # reads on several threads, some raising it and some not: the raising ones all read the image, the others
    # are refused by Pillow's setting, or read it where it was raised by another thread at the time (documented),
    # and the application's setting is what remains
    outcomes, barrier = {True: set(), False: set()}, threading.Barrier(4)

    def reader(k):
        barrier.wait()
        for i in range(300):  # (enough for an unlocked version to fail most runs)
            limit = (6 * 10**7, 10**8, MAX_PIXELS)[(i + k) % 3]
            try:
                read_grey(tmp_path / "over.png", max_pixels=limit)
                outcomes[limit > MAX_PIXELS].add("read")
            except ImageTooLarge as exc:
                outcomes[limit > MAX_PIXELS].add("Pillow's" if exc.pillow and exc.limit == 2000 else str(exc))

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes[True] == {"read"} and outcomes[False] <= {"read", "Pillow's"} and outcomes[False], outcomes
    assert PILImage.MAX_IMAGE_PIXELS == 1000


def test_pillow_limit_set_by_the_application_is_kept_and_named(tmp_path, monkeypatch):
    # an application's lower Image.MAX_IMAGE_PIXELS stays in force (never raised to max_pixels); Pillow's warning
    # between its limit and twice it is not shown (max_pixels is checked instead), its error is our one line
    import warnings

    from PIL import Image as PILImage

    monkeypatch.setattr(PILImage, "MAX_IMAGE_PIXELS", 1000)
    Image.new("L", (100, 50)).save(tmp_path / "over.png")  # 5,000 pixels > 2 x 1,000
    Image.new("L", (40, 40)).save(tmp_path / "warned.png")  # 1,600: Pillow warns
    with pytest.raises(ImageError, match=r"over.png: 5,000 pixels exceeds Pillow's limit of 2,000 \(twice "):
        read_grey(tmp_path / "over.png")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_rgb(tmp_path / "warned.png").shape == (40, 40, 3)
    with pytest.raises(ImageError, match=r"warned.png: 40x40 = 1,600 pixels exceeds the limit of 1,500 "):
        read_grey(tmp_path / "warned.png", max_pixels=1500)

    # should Pillow word its error otherwise, the message still names the file and the limit
    def refuse(*args, **kwargs):
        raise PILImage.DecompressionBombError("too big")

    monkeypatch.setattr(PILImage, "open", refuse)
    with pytest.raises(ImageError, match=r"warned.png: over 2,000 pixels exceeds the limit of 1,500 "):
        read_grey(tmp_path / "warned.png", max_pixels=1500)


def test_unsupported_float_mode(tmp_path):
    path = tmp_path / "float.tif"
    Image.fromarray(np.zeros((8, 8), np.float32)).save(path)
    with pytest.raises(ImageError, match="float.tif: unsupported pixel mode 'F'"):
        read_grey(path)


@pytest.mark.parametrize("read", [read_grey, read_rgb])
@pytest.mark.parametrize("pixels", [np.zeros((8, 8), np.float32), np.full((8, 8), 70_000, np.int32)])
def test_unsupported_modes_from_standard_input_are_image_errors_named_dash(read, pixels):
    # a file object (facedet detect -) reached os.fspath in the message: TypeError, which stopped a batch
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="TIFF")
    buffer.seek(0)
    with pytest.raises(ImageError, match=r"^-: (unsupported pixel mode|32-bit integer image)"):
        read(buffer)


def test_write_image_roundtrip_and_atomic(tmp_path, astronaut):
    rgb = read_rgb(astronaut)
    png = write_image(tmp_path / "out.png", rgb)
    np.testing.assert_array_equal(read_rgb(png), rgb)
    jpg = write_image(tmp_path / "out.JPG", rgb)
    assert Image.open(jpg).format == "JPEG"
    assert np.abs(read_rgb(jpg).astype(int) - rgb).mean() < 3
    grey = read_grey(astronaut)
    np.testing.assert_array_equal(read_grey(write_image(tmp_path / "g.png", grey)), grey)
    # a failed write leaves the existing file and no temporary behind
    before = png.read_bytes()
    with pytest.raises(TypeError, match="uint8"):
        write_image(png, rgb.astype(float))
    with pytest.raises(ValueError, match="suffix"):
        write_image(tmp_path / "out.unknownext", rgb)
    with pytest.raises(ValueError, match="shape"):
        write_image(tmp_path / "bad.png", rgb[..., :2])
    with pytest.raises(OSError):
        write_image(tmp_path / "bad.jpg", np.zeros((70000, 1, 3), np.uint8))  # beyond JPEG's 65535 limit
    assert png.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.png", "out.JPG", "out.png"]
