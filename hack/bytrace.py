#!/usr/bin/env python3
"""Per-trace summary of an `rl-agent demo`/`eval` report.json (docs/results/evidence.md).

Usage: hack/bytrace.py REPORT [PREFIX]

Prints, per trace kind, each policy's cost as a multiple of the first
policy's (the base, e.g. fused) and its share of SLO-violating windows.
With PREFIX, also the hindsight choice: for every (app, trace) run the
cheapest of the base and the policies named PREFIX... whose SLO-violating
windows are at most the base's, totalled (an upper bound on a chooser that
picks among them per run, since it knows each run's outcome).
"""
import collections
import json
import sys

report = json.load(open(sys.argv[1]))
prefix = sys.argv[2] if len(sys.argv) > 2 else None
runs = collections.defaultdict(dict)  # (app, trace) -> policy -> result
for x in report['results']:
    runs[(x['app'], x['trace'])][x['policy']] = x
policies = [s['policy'] for s in report['summaries']]
base = policies[0]

print('| Trace | %s SLO viol. | %s |' % (base, ' | '.join(policies[1:])))
print('|---' * (len(policies) + 1) + '|')
for trace in dict.fromkeys(t for _, t in runs):
    tot = collections.defaultdict(lambda: [0.0, 0, 0])
    for (_, t), by in runs.items():
        if t == trace:
            for p, x in by.items():
                s = tot[p]
                s[0] += x['cost']; s[1] += x['sloViolations']; s[2] += x['steps']
    b = tot[base]
    cells = ['%.2f× cost, %.2f%%' % (tot[p][0] / b[0], 100 * tot[p][1] / tot[p][2]) for p in policies[1:]]
    print('| %s | %.2f%% | %s |' % (trace, 100 * b[1] / b[2], ' | '.join(cells)))

if prefix:
    cost = [0.0, 0.0]; viol = [0, 0]; reward = [0.0, 0.0]; picks = collections.Counter()
    for by in runs.values():
        b = by[base]
        ok = [p for p in by if p == base or (p.startswith(prefix) and by[p]['sloViolations'] <= b['sloViolations'])]
        best = min(ok, key=lambda p: by[p]['cost'])
        picks[best] += 1
        for i, x in enumerate((b, by[best])):
            cost[i] += x['cost']; viol[i] += x['sloViolations']; reward[i] += x['meanReward']
    n = len(runs)
    print('\nhindsight over %s and %s*: cost %.3f× the base, SLO-violating windows %d against %d, reward %.4f against %.4f; picks %s'
          % (base, prefix, cost[1] / cost[0], viol[1], viol[0], reward[1] / n, reward[0] / n, dict(picks)))
