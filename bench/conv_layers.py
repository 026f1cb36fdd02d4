"""conv2d and max_pool2d forward+backward for the DESIGN.md cnn workload, ember vs torch
(CPU), interleaved for DURATION seconds; reports the minimum of each (the machine is
shared, so the minimum is the least-disturbed measurement)."""
import sys, time, numpy as np, torch, ember
import ember.nn.functional as F
torch.set_num_threads(int(__import__("os").environ.get("THREADS", "2")))
DURATION = float(sys.argv[1]) if len(sys.argv) > 1 else 60
rng = np.random.default_rng(0)
cases = []
for (N, C, H, O, xgrad) in [(64, 1, 28, 32, False), (64, 32, 13, 64, True)]:
    x = rng.standard_normal((N, C, H, H)).astype(np.float32)
    w = (rng.standard_normal((O, C, 3, 3)) * 0.1).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    g = rng.standard_normal((N, O, H - 2, H - 2)).astype(np.float32)
    e = [ember.tensor(x, requires_grad=xgrad), ember.tensor(w, requires_grad=True),
         ember.tensor(b, requires_grad=True), ember.tensor(g)]
    t = [torch.tensor(x, requires_grad=xgrad), torch.tensor(w, requires_grad=True),
         torch.tensor(b, requires_grad=True), torch.tensor(g)]
    cases.append((f"conv {C}->{O} 3x3 on {H}x{H}",
                  lambda e=e: F.conv2d(e[0], e[1], e[2]).backward(e[3]),
                  lambda t=t: torch.nn.functional.conv2d(t[0], t[1], t[2]).backward(t[3])))
for (N, C, H) in [(64, 32, 26), (64, 64, 11)]:
    x = rng.standard_normal((N, C, H, H)).astype(np.float32)
    g = rng.standard_normal((N, C, H // 2, H // 2)).astype(np.float32)
    ex, eg = ember.tensor(x, requires_grad=True), ember.tensor(g)
    tx, tg = torch.tensor(x, requires_grad=True), torch.tensor(g)
    cases.append((f"max_pool2d(2) on {(N, C, H, H)}",
                  lambda ex=ex, eg=eg: F.max_pool2d(ex, 2).backward(eg),
                  lambda tx=tx, tg=tg: torch.nn.functional.max_pool2d(tx, 2).backward(tg)))
best = {name: [np.inf, np.inf] for name, _, _ in cases}
end = time.time() + DURATION
while time.time() < end:
    for name, ef, tf in cases:
        for i, f in enumerate((ef, tf)):
            t0 = time.perf_counter(); f(); dt = time.perf_counter() - t0
            best[name][i] = min(best[name][i], dt * 1e3)
tot = [0.0, 0.0]
for name, (e, t) in best.items():
    print(f"{name:36s} fwd+bwd  ember {e:6.2f} ms  torch {t:6.2f} ms  ratio {e / t:.2f}")
    if name.startswith("conv"):
        tot[0] += e; tot[1] += t
print(f"{'both convs':36s} fwd+bwd  ember {tot[0]:6.2f} ms  torch {tot[1]:6.2f} ms  ratio {tot[0] / tot[1]:.2f}")
