"""Whole commands timed: ``facedet detect`` on a batch of photos against a script running OpenCV's Haar cascade
on the same files, start-up, image reading and output included, as a user runs them.

    PYTHONPATH=. python scripts/bench_batch.py [--repeat 3]            # the 130 MIT+CMU photos
    PYTHONPATH=. python scripts/bench_batch.py --megapixels 12         # one 12-MP photo, peak memory too

The batch is mit_cmu_frontal/images (speed only: nothing is fitted or chosen on it). ``--megapixels N`` instead
makes one photo of about N megapixels, the largest Web Faces photo resized by OpenCV (INTER_CUBIC) to a 3:4 frame,
in a temporary folder. Each command runs in its own process with the machine's defaults (every core: facedet scans
pyramid levels on threads, OpenCV's cascade uses its own thread pool), writes one JSON line per image, and is
timed by wall clock and by the CPU time and peak resident memory the kernel reports for that process
(``os.wait4``). The Haar script runs ``detectMultiScale2`` with scale factor 1.1, minNeighbors 3 and minSize 20 on
the grey image, as OpenCV users run it. The commands take turns, ``--repeat`` rounds; the best round of each is
reported, with facedet's time as a ratio to Haar's.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _script import DATA, positive_int, require_data

HAAR = """
import json, sys
import cv2
cascade = cv2.CascadeClassifier(cv2.data.haarcascades + "haarcascade_frontalface_default.xml")
with open(sys.argv[1], "w") as out:
    for path in sys.argv[2:]:
        grey = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
        if grey is None:  # OpenCV reads no GIF: Pillow, as facedet
            import numpy as np
            from PIL import Image
            grey = np.asarray(Image.open(path).convert("L"))
        boxes, neighbours = cv2.CascadeClassifier.detectMultiScale2(cascade, grey, scaleFactor=1.1, minNeighbors=3,
                                                                    minSize=(20, 20))
        out.write(json.dumps({"path": path, "faces": [list(map(int, b)) for b in boxes]}) + "\\n")
"""


def run(cmd):
    """(wall seconds, CPU seconds, peak RSS in MB) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{cmd[:5]} ... failed with exit code {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def count_faces(jsonl):
    with open(jsonl) as f:
        records = [json.loads(line) for line in f]
    return len(records), sum(len(r["faces"]) for r in records)


def make_photo(folder, megapixels):
    """The largest Web Faces photo resized to about ``megapixels`` in a 3:4 frame; returns its path."""
    import cv2
    import numpy as np
    from PIL import Image

    images = sorted((DATA / "caltech_webfaces" / "images").glob("*.jpg"))
    largest = max(images, key=lambda p: np.prod(Image.open(p).size))
    rgb = np.asarray(Image.open(largest).convert("RGB"))
    h, w = rgb.shape[:2]
    side = (megapixels * 1e6 / 12) ** 0.5  # 3:4, portrait or landscape as the photo
    size = (round(3 * side), round(4 * side)) if h > w else (round(4 * side), round(3 * side))
    path = Path(folder) / f"{largest.stem}_{megapixels}mp.png"
    Image.fromarray(cv2.resize(rgb, size, interpolation=cv2.INTER_CUBIC)).save(path)
    print(f"{largest.name} {w}x{h} resized to {size[0]}x{size[1]} ({size[0] * size[1] / 1e6:.1f} MP)")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--repeat", type=positive_int, default=3, help="rounds; the best of each is reported (default: %(default)s)"
    )
    ap.add_argument(
        "--megapixels",
        type=positive_int,
        default=None,
        help="time one photo of about this many megapixels (default: none, the MIT+CMU batch)",
    )
    ap.add_argument("--data", type=Path, default=DATA, help="the shared/data folder (default: %(default)s)")
    args = ap.parse_args()
    require_data(args.data)
    with tempfile.TemporaryDirectory() as tmp:
        if args.megapixels:
            files = [str(make_photo(tmp, args.megapixels))]
        else:
            files = sorted(str(p) for p in (args.data / "mit_cmu_frontal" / "images").iterdir())
        out = {name: str(Path(tmp) / f"{name}.jsonl") for name in ("facedet", "haar")}
        commands = {
            "facedet": [sys.executable, "-m", "facedet", "detect", *files, "--jsonl", out["facedet"], "--overwrite"],
            "haar": [sys.executable, "-c", HAAR, out["haar"], *files],
        }
        best = {name: None for name in commands}
        for _ in range(args.repeat):
            for name, cmd in commands.items():
                if name == "facedet" and os.path.exists(out[name]):
                    os.remove(out[name])
                result = run(cmd)
                if best[name] is None or result[0] < best[name][0]:
                    best[name] = result
        print(f"{len(files)} image(s), best of {args.repeat} rounds, each command whole (start-up included)")
        print(
            f"{'command':10s} {'wall s':>8s} {'CPU s':>8s} {'peak MB':>8s} {'images':>7s} {'faces':>6s} "
            f"{'wall ratio':>11s}"
        )
        for name, (wall, cpu, rss) in best.items():
            n, faces = count_faces(out[name])
            print(f"{name:10s} {wall:8.2f} {cpu:8.2f} {rss:8.0f} {n:7d} {faces:6d} {wall / best['haar'][0]:10.2f}x")


if __name__ == "__main__":
    main()
