#!/usr/bin/env python3
"""Where an offload run's iteration goes beside the same net's no-offload run.

usage: steps-compare.py NONE-steps.tsv[.xz] OFFLOAD-steps.tsv[.xz] [N]

Both files are vdnn-train --step-times-out of one profile. Steps are matched
by their op label (a split layer's chunks and recomputes have labels of their
own and stay unmatched). For the matched steps, grouped by what ran beside
them in the offload run: the time in the no-offload run, in the offload run,
and what the simulator predicted for each; then the N steps whose measured
growth exceeds their predicted growth most (a step's time includes the
waits issued before it on the compute stream)."""
import lzma, sys
from collections import defaultdict

def load(path):
    op = lzma.open if path.endswith('.xz') else open
    rows = []
    with op(path, 'rt') as f:
        next(f)
        for line in f:
            s, name, meas, pred, end, pend, beside = line.rstrip('\n').split('\t')
            rows.append((int(s), name, float(meas), float(pred), beside))
    return rows

def main():
    base, off = load(sys.argv[1]), load(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    seen = defaultdict(int)
    bkey = {}
    for s, name, m, p, _ in base:
        seen[name] += 1
        bkey[(name, seen[name])] = (m, p)
    seen.clear()
    groups = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])
    excess = []
    for s, name, m, p, beside in off:
        seen[name] += 1
        k = (name, seen[name])
        if k not in bkey:
            g = groups['unmatched (' + beside + ')']
            g[0] += 1; g[3] += m; g[4] += p
            continue
        bm, bp = bkey[k]
        g = groups[beside]
        g[0] += 1; g[1] += bm; g[2] += bp; g[3] += m; g[4] += p
        excess.append(((m - bm) - (p - bp), s, name, beside, bm, m, bp, p))
    print('%-24s %5s %10s %10s %10s %10s %8s %8s' % ('beside (offload run)', 'steps', 'none meas', 'none pred',
                                                  'off meas', 'off pred', 'growth', 'pred gr'))
    tot = [0, 0.0, 0.0, 0.0, 0.0]
    for k in sorted(groups):
        g = groups[k]
        tot = [a + b for a, b in zip(tot, g)]
        print('%-24s %5d %10.3f %10.3f %10.3f %10.3f %8.3f %8.3f' % (k, g[0], g[1], g[2], g[3], g[4],
                                                                    g[3] - g[1], g[4] - g[2]))
    print('%-24s %5d %10.3f %10.3f %10.3f %10.3f' % ('all', tot[0], tot[1], tot[2], tot[3], tot[4]))
    print('\nsteps growing most beyond their predicted growth (ms):')
    print('%5s %-34s %-7s %8s %8s %8s %8s %8s' % ('step', 'op', 'beside', 'none', 'off', 'none pr', 'off pr', 'excess'))
    for x, s, name, beside, bm, m, bp, p in sorted(excess, reverse=True)[:n]:
        print('%5d %-34s %-7s %8.3f %8.3f %8.3f %8.3f %8.3f' % (s, name[:34], beside, bm, m, bp, p, x))

if __name__ == '__main__':
    main()
