"""Read-bandwidth references: torch.sum / clone / mv / mm over B, CUDA events, median of 50.

(The printed "GB/s" column is in TB/s: bytes / milliseconds / 1e9.)"""

import torch


def t(fn, reps=50):
    for _ in range(5):
        fn()
    s = [torch.cuda.Event(enable_timing=True) for _ in range(2 * reps)]
    for i in range(reps):
        s[2 * i].record()
        fn()
        s[2 * i + 1].record()
    torch.cuda.synchronize()
    return sorted(s[2 * i].elapsed_time(s[2 * i + 1]) for i in range(reps))[reps // 2]


torch.backends.cuda.matmul.allow_tf32 = False
print(torch.cuda.get_device_name())
for n in (4096, 8192):
    b = torch.randn(n, n, device="cuda")
    x = torch.randn(n, device="cuda")
    y = torch.randn(1, n, device="cuda")
    y8 = torch.randn(8, n, device="cuda")
    nb = b.numel() * 4
    for name, fn, mult in (("sum", lambda b=b: b.sum(), 1), ("clone", lambda b=b: b.clone(), 2),
                           ("mv", lambda b=b, x=x: torch.mv(b, x), 1),
                           ("mm1", lambda b=b, y=y: y @ b, 1),
                           ("mm8", lambda b=b, y8=y8: y8 @ b, 1)):
        ms = t(fn)
        print(f"{name:6s} {n}^2 {ms * 1e3:8.1f} us {mult * nb / ms / 1e9:7.0f} GB/s")
