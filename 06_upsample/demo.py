"""Chapter 06 demo: one row of three pixels resized to five, in each convention."""

import sys
from pathlib import Path

import torch  # first: the extension links against libtorch, which importing torch loads
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # `python 06_upsample/demo.py` from anywhere: coursekit is in the course root
try:
    from coursekit.build import describe, load_python
except ImportError:  # this folder copied out and installed with pip (a wheel, see setup.py): the package
    # the package's sources in ch06_upsample/ beside this file would shadow the installed package
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
    import ch06_upsample as up
    print(f"built: installed, {'CPU+CUDA' if up.WITH_CUDA else 'CPU'}")
else:
    up = load_python(HERE, "upsample")  # builds csrc/ (JIT) and registers torch.ops.ch06.*
    import ch06_upsample  # (loaded by the line above)
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
