"""Write tests/data/06_tf_legacy_golden.json with TensorFlow's own bilinear resize.

Run it with a Python that has TensorFlow (the tests do not need it):
    python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow-cpu
    /tmp/tfenv/bin/python 06_upsample/make_tf_golden.py

For each case it stores a small NCHW input and what
tf.compat.v1.image.resize_bilinear returns for each of its three settings,
converted back to NCHW. TensorFlow works in NHWC and always in float32.
"""

import json
from pathlib import Path

import numpy as np
import tensorflow as tf

# (N, C, H_in, W_in) -> (H_out, W_out): up, down, mixed, 1-pixel and identity shapes.
CASES = [
    ((1, 1, 3, 3), (5, 5)),
    ((1, 2, 4, 6), (7, 3)),
    ((2, 1, 5, 5), (2, 3)),
    ((1, 2, 1, 1), (3, 2)),
    ((1, 1, 2, 3), (6, 9)),
    ((1, 1, 6, 4), (6, 4)),
    ((1, 1, 3, 8), (1, 1)),
]
# Our mode name -> TF's (align_corners, half_pixel_centers)
SETTINGS = {"tf_legacy": (False, False), "align_corners": (True, False), "half_pixel": (False, True)}


def main() -> None:
    rng = np.random.default_rng(6)
    cases = []
    for shape, size in CASES:
        x = rng.standard_normal(shape).astype(np.float32)
        nhwc = np.transpose(x, (0, 2, 3, 1))
        entry = {"input": x.tolist(), "size": list(size), "outputs": {}}
        for mode, (align, half) in SETTINGS.items():
            y = tf.compat.v1.image.resize_bilinear(nhwc, size, align_corners=align, half_pixel_centers=half)
            entry["outputs"][mode] = np.transpose(y.numpy(), (0, 3, 1, 2)).tolist()
        cases.append(entry)
    doc = {
        "generator": "06_upsample/make_tf_golden.py",
        "tensorflow": tf.__version__,
        "function": "tf.compat.v1.image.resize_bilinear (float32, NHWC)",
        "cases": cases,
    }
    out = Path(__file__).resolve().parent.parent / "tests" / "data" / "06_tf_legacy_golden.json"
    out.write_text(json.dumps(doc) + "\n")
    print(f"wrote {out} ({len(cases)} cases, TensorFlow {tf.__version__})")


if __name__ == "__main__":
    main()
