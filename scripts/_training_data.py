"""The data both detector-training scripts use: CBCL train patches, the face-free negative images and the
annotated scenes (train and test splits), plus the per-split evaluation of a detector on those scenes."""
from __future__ import annotations

import cv2
import numpy as np

from facedet.evaluate import evaluate_detections, read_annotations
from facedet.imageio import read_grey
from facedet.patches import image_files, load_npz


def load_training_data(data):
    """(X, y, negatives, ann, images) from ../shared/data: CBCL train windows and labels, the grey
    nonface_scenes images, the scene annotations per split and the scene images by name."""
    X, y = load_npz(data / "cbcl_face_db1" / "cbcl_face_db1_19x19_uint8.npz", "train")
    neg_paths = sorted(p for d in sorted((data / "nonface_scenes").iterdir()) if d.is_dir()
                       for p in image_files(d))
    negatives = [read_grey(p) for p in neg_paths]
    scenes = data / "scenes_annotated_dlib_voc"
    ann = {s: read_annotations(scenes / "boxes.csv", split=s) for s in ("train", "test")}
    images = {name: read_grey(scenes / "images" / name) for s in ann for name in ann[s]}
    print(f"patches: {int(y.sum())} faces, {int((y == 0).sum())} non-faces; {len(negatives)} negative images")
    return X, y, negatives, ann, images


def lfw_faces(data, side=75):
    """The 100 LFW faces of misc_faces_skimage/lfw_subset.npy as (image, box) items: each 25x25 crop
    (forehead to chin) enlarged to side x side uint8, its box the whole image."""
    faces = np.load(data / "misc_faces_skimage" / "lfw_subset.npy")[:100]
    return [(cv2.resize(np.rint(f * 255).astype(np.uint8), (side, side), interpolation=cv2.INTER_CUBIC),
             np.array([[0.0, 0.0, side, side]])) for f in faces]


def evaluate_scenes(det, ann, images):
    """{split: (detection rate, false positives, average precision)} of ``det`` on the annotated scenes."""
    out = {}
    for split, a in ann.items():
        res = evaluate_detections({n: det.detect(images[n]) for n in a}, a)
        out[split] = (res.detection_rate, res.false_positives, res.average_precision)
    return out
