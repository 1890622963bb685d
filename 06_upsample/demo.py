"""Chapter 06 demo: one row of three pixels resized to five, in each convention."""

import sys
from pathlib import Path

import torch  # first: the extension links against libtorch, which importing torch loads
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python NN_chapter/demo.py` from anywhere: coursekit is in the course root
from coursekit.build import describe, load_python

HERE = Path(__file__).parent
up = load_python(HERE, "upsample")  # builds csrc/ (JIT) and registers torch.ops.ch06.*
import ch06_upsample  # noqa: E402  (loaded by the line above)
print(f"built: {describe(ch06_upsample)}")

x = torch.tensor([[[[10.0, 20.0, 40.0]]]])  # (N, C, H, W) = (1, 1, 1, 3)
for mode in up.MODES:
    print(f"{mode:14s}", [round(v, 2) for v in up.upsample_bilinear(x, (1, 5), mode=mode).flatten().tolist()])

img = torch.randn(2, 3, 17, 23, dtype=torch.float64)
diff = {
    mode: (up.upsample_bilinear(img, (40, 31), mode=mode)
           - F.interpolate(img, size=(40, 31), mode="bilinear", align_corners=ac)).abs().max().item()
    for mode, ac in (("half_pixel", False), ("align_corners", True))
}
print(f"max |ours - F.interpolate| on 17x23 -> 40x31: half_pixel {diff['half_pixel']:.1e}, "
      f"align_corners {diff['align_corners']:.1e}")
