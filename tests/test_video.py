"""Videos: a video made of real photos (written losslessly by OpenCV's VideoWriter) gives, frame by frame, the
faces of the photos; --every, annotated videos and bad files on the command line."""

import json

import cv2
import numpy as np
import pytest
from typer.testing import CliRunner

import facedet
from facedet.cli import app
from facedet.imageio import ImageError, read_rgb, read_video

runner = CliRunner()
SIZE = (480, 360)  # (width, height) of every frame


@pytest.fixture(scope="module")
def video(data_dir, tmp_path_factory):
    """(path, frames): 4 photos of the annotated scenes as the frames of a lossless FFV1 video at 2 fps."""
    scenes = sorted((data_dir / "scenes_annotated_dlib_voc" / "images").iterdir())[:4]
    frames = [cv2.resize(read_rgb(p), SIZE, interpolation=cv2.INTER_AREA) for p in scenes]
    path = tmp_path_factory.mktemp("video") / "scenes.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"FFV1"), 2.0, SIZE)
    assert writer.isOpened()
    for rgb in frames:
        writer.write(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    writer.release()
    return path, frames


def test_frames_read_back_exactly_with_index_and_time(video):
    path, frames = video
    got = list(read_video(path))
    assert [(i, t) for i, t, _ in got] == [(0, 0.0), (1, 0.5), (2, 1.0), (3, 1.5)]
    for (_, _, rgb), expected in zip(got, frames, strict=True):
        np.testing.assert_array_equal(rgb, expected)
    assert [i for i, _, _ in read_video(path, every=3)] == [0, 3]


def test_faces_per_frame_are_the_photos_faces(video):
    path, frames = video
    expected = [facedet.detect(rgb) for rgb in frames]
    assert sum(map(len, expected)) >= 4  # photos with faces: agreement on empty lists would prove nothing
    assert [faces for _, _, faces in facedet.detect_video(path)] == expected
    r = runner.invoke(app, ["detect", str(path), "--json", "--every", "2"])
    assert r.exit_code == 0, r.output
    records = json.loads(r.stdout)
    assert [(x["frame"], x["time"], x["width"], x["height"]) for x in records] == [(0, 0.0, *SIZE), (2, 1.0, *SIZE)]
    for x, faces in zip(records, expected[::2], strict=True):
        assert [[f[k] for k in "xywh"] for f in x["faces"]] == [[round(v) for v in f.box] for f in faces]


def test_annotated_video_and_bad_files(video, tmp_path):
    path, frames = video
    r = runner.invoke(app, ["detect", str(path), "--out", str(tmp_path / "out"), "--json"])
    assert r.exit_code == 0, r.output
    written = tmp_path / "out" / "scenes.faces.mp4"
    assert {x["annotated"] for x in json.loads(r.stdout)} == {str(written)}
    cap = cv2.VideoCapture(str(written))
    assert (cap.get(cv2.CAP_PROP_FRAME_COUNT), cap.get(cv2.CAP_PROP_FRAME_WIDTH)) == (len(frames), SIZE[0])
    cap.release()
    r = runner.invoke(app, ["detect", str(path), "--out", str(tmp_path / "one.png")])
    assert r.exit_code == 2 and "give a video file" in r.stderr
    fake = tmp_path / "fake.mp4"
    fake.write_bytes(b"not a video at all")
    r = runner.invoke(app, ["detect", str(fake), str(path), "--json", "--every", "4"])
    assert r.exit_code == 1 and "fake.mp4: cannot read as a video" in r.stderr
    records = json.loads(r.stdout)
    assert "error" in records[0] and [x["frame"] for x in records[1:]] == [0]
    with pytest.raises(ImageError, match="file not found"):
        next(read_video(tmp_path / "missing.mp4"))
    with pytest.raises(ValueError, match="every"):
        next(read_video(path, every=0))
