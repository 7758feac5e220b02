"""The markdown table of .ci/bench-rtm: reads the reports of rtm-bench and
rtm_sdk_bench.py (one JSON line each, in BENCH_DIR/<scenario>.<client>.<round>.json, the
hub's CPU seconds during that run in ….hub) and prints medians, ranges and ratios.

Environment: BENCH_DIR, REPEAT, COUNT, SDK_COUNT, WINDOW, LATENCY, REPRODUCE, COMMIT, CPUS,
CPU_MODEL, LOAD_BEFORE, LOAD_AFTER, RUSTC, PYTHON. Exit code 0 always: the figures are
reported, never judged (the driver's exit code says whether a run broke).
"""

import json
import os
import statistics

SCENARIOS = ('publish_ack', 'publish_noack', 'subscribe')
CLIENTS = ('benchlink', 'sdk')
RATE, US, MIB = '{:,.0f}', '{:.1f}', '{:.1f}'


def load(directory, name):
    try:
        with open(os.path.join(directory, name + '.json')) as f:
            r = json.loads(f.read() or '{}')
    except (OSError, ValueError) as e:
        r = {'error': 'no report (%s)' % e}
    try:
        with open(os.path.join(directory, name + '.hub')) as f:
            hub = float(f.read())
        if isinstance(r.get('messages'), int):
            r['hub_us_per_msg'] = hub * 1e6 / max(r['messages'], 1)
    except (OSError, ValueError):
        pass
    return r


class Runs(object):
    def __init__(self, directory, rounds):
        self.runs = {(s, c): [load(directory, '%s.%s.%d' % (s, c, k))
                              for k in range(1, rounds + 1)]
                     for s in SCENARIOS for c in CLIENTS}

    def failures(self):
        return [(s, c, r['error']) for (s, c), rs in sorted(self.runs.items())
                for r in rs if 'error' in r]

    def values(self, s, c, key):
        return [r[key] for r in self.runs[(s, c)]
                if 'error' not in r and isinstance(r.get(key), (int, float))]

    def median(self, s, c, key):
        v = self.values(s, c, key)
        return statistics.median(v) if v else None

    def cell(self, s, c, key, spec, prefix=''):
        v = self.values(s, c, key)
        if not v:
            return 'failed' if any('error' in r for r in self.runs[(s, c)]) else 'n/a'
        text = prefix + spec.format(statistics.median(v))
        if len(v) > 1:
            text += ' (%s–%s)' % (spec.format(min(v)), spec.format(max(v)))
        return text

    def ratio(self, s, key):
        a, b = self.median(s, 'benchlink', key), self.median(s, 'sdk', key)
        return '{:.2f}×'.format(a / b) if a is not None and b else 'n/a'

    def row(self, label, s, key, spec, ratio=True, prefixes=('', '')):
        return (label,
                self.cell(s, 'benchlink', key, spec, prefixes[0]),
                self.cell(s, 'sdk', key, spec, prefixes[1]),
                self.ratio(s, key) if ratio else '')

    def kept_up(self, c):
        """Whether the subscriber of every round received everything about as fast as the
        publisher sent it: then the publisher and the hub set the pace, and the
        subscriber's own limit is higher than its figure."""
        rs = [r for r in self.runs[('subscribe', c)] if 'error' not in r]
        return bool(rs) and all(
            r.get('dropped') == 0 and isinstance(r.get('publisher_rate'), (int, float))
            and r.get('rate', 0) >= 0.9 * r['publisher_rate'] for r in rs)

    def sub_prefix(self, c):
        return '≥ ' if self.kept_up(c) else ''


def main():
    env = os.environ
    rounds = int(env['REPEAT'])
    runs = Runs(env['BENCH_DIR'], rounds)
    subs = (runs.sub_prefix('benchlink'), runs.sub_prefix('sdk'))
    rows = [
        runs.row('publish with acks, window %s (msgs/s)' % env['WINDOW'],
                 'publish_ack', 'rate', RATE),
        runs.row('publish without acks (msgs/s)', 'publish_noack', 'rate', RATE),
        runs.row('subscription receive (msgs/s)', 'subscribe', 'rate', RATE, prefixes=subs),
        runs.row('**client CPU per acked publish (µs)**', 'publish_ack', 'cpu_us_per_msg', US),
        runs.row('… of which system (µs)', 'publish_ack', 'cpu_sys_us_per_msg', US),
        runs.row('client CPU per publish without ack (µs)', 'publish_noack',
                 'cpu_us_per_msg', US),
        runs.row('client CPU per received message (µs)', 'subscribe', 'cpu_us_per_msg', US),
        runs.row('client peak memory, acked publishes (MiB)', 'publish_ack', 'peak_rss_mib',
                 MIB),
        runs.row('hub CPU per acked publish (µs)', 'publish_ack', 'hub_us_per_msg', US,
                 ratio=False),
        runs.row('hub CPU per publish without ack (µs)', 'publish_noack', 'hub_us_per_msg', US,
                 ratio=False),
        runs.row('hub CPU per received message, publishing included (µs)', 'subscribe',
                 'hub_us_per_msg', US, ratio=False),
    ]
    latency = int(env.get('LATENCY') or 0)
    link = ('loopback' if latency == 0 else
            'a %d ms round trip (each direction delayed %d ms)' % (2 * latency, latency))
    print('| one connection, %s, one hub | benchlink | SDK 1.5.0 | benchlink / SDK |' % link)
    print('|---|---|---|---|')
    for r in rows:
        print('| %s | %s | %s | %s |' % r)
    print()
    notes = [
        '%s messages per scenario for benchlink, %s for the SDK, about 70 bytes of JSON each; '
        '%d round(s), the clients taking turns; median (min–max).' % (
            env['COUNT'], env['SDK_COUNT'], rounds),
    ]
    for c, name in (('benchlink', 'benchlink'), ('sdk', 'SDK')):
        got = runs.values('subscribe', c, 'messages')
        dropped = runs.values('subscribe', c, 'dropped')
        pub = runs.values('subscribe', c, 'publisher_rate')
        if got:
            notes.append(
                'Subscription, %s: received %s, skipped by the hub for a subscriber that fell '
                'behind %s; the raw flood publisher ran at %s msgs/s.' % (
                    name, '/'.join(str(x) for x in got), '/'.join(str(x) for x in dropped),
                    '/'.join(RATE.format(x) for x in pub)))
    if any(subs):
        notes.append(
            '"≥": the subscriber received everything as fast as the publisher sent it (nothing '
            'skipped, at least 90 % of the publisher\'s rate): the publisher and the hub set '
            'that pace, the subscriber\'s own limit is higher.')
    notes += [
        'CPU: user + system time of the client process (hub: of the hub process) over the '
        'measured interval, from /proc/<pid>/stat (10 ms ticks); lower is better.',
        'Machine: %s CPUs (%s), shared; load average %s before, %s after; %s; %s; commit %s.' % (
            env['CPUS'], env['CPU_MODEL'], env['LOAD_BEFORE'], env['LOAD_AFTER'], env['RUSTC'],
            env['PYTHON'], env['COMMIT']),
        'Reproduce: `%s`' % env['REPRODUCE'],
    ]
    failed = runs.failures()
    if failed:
        notes.append('**Failed:** ' + '; '.join('%s %s: %s' % f for f in failed))
    print('- ' + '\n- '.join(notes))


if __name__ == '__main__':
    main()
