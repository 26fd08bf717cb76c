#!/usr/bin/env python3
"""Paired comparisons pooled over several `rl-agent demo`/`eval` report.json
files (for instance one per --seed), as the demo prints them for one
(docs/serverless.md).

Usage: hack/pooled.py BASE REPORT...

Every run of a policy is paired with BASE's run of the same (app, trace,
seed); prints, per policy, the number of pairs and the mean paired
difference with its 95% Student-t interval of: the share of SLO-violating
windows (points), the mean reward, the cost (ratio to BASE's, minus one)
and the share of requests lost (points).
"""
import collections
import json
import math
import sys


def t975(df):
    """The 97.5% quantile of Student's t (Cornish-Fisher, within 1e-3 for df >= 3)."""
    z = 1.959964
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    return z + g1 / df + g2 / df**2 + g3 / df**3


def interval(xs):
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, m, m
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    h = t975(n - 1) * sd / math.sqrt(n)
    return m, m - h, m + h


def main():
    base, paths = sys.argv[1], sys.argv[2:]
    runs = collections.defaultdict(dict)  # (app, trace, seed) -> policy -> result
    order = []
    for p in paths:
        for x in json.load(open(p))['results']:
            runs[(x['app'], x['trace'], x['seed'])][x['policy']] = x
            if x['policy'] not in order:
                order.append(x['policy'])
    fmt = '%+.2f [%+.2f, %+.2f]'
    print('%-20s %6s  %-26s %-30s %-26s %-26s' % ('POLICY', 'PAIRS', 'SLO VIOL (POINTS)', 'REWARD', 'COST (%)', 'LOST REQ (POINTS)'))
    for pol in order:
        if pol == base:
            continue
        slo, rew, cost, lost = [], [], [], []
        for by in runs.values():
            if pol not in by or base not in by:
                continue
            x, b = by[pol], by[base]
            slo.append(100 * (x['sloViolationRate'] - b['sloViolationRate']))
            rew.append(x['meanReward'] - b['meanReward'])
            cost.append(100 * (x['cost'] / b['cost'] - 1) if b['cost'] > 0 else 0)
            share = lambda r: r['lostRequests'] / r['requests'] if r['requests'] > 0 else 0
            lost.append(100 * (share(x) - share(b)))
        if not slo:
            continue
        print('%-20s %6d  %-26s %-30s %-26s %-26s' % (pol, len(slo), fmt % interval(slo),
              '%+.4f [%+.4f, %+.4f]' % interval(rew), fmt % interval(cost), fmt % interval(lost)))


if __name__ == '__main__':
    main()
