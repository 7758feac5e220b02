"""The markdown tables of .ci/bench-rtm, one per round trip: reads the reports of
rtm-bench, the CLI's timing and rtm_sdk_bench.py (one JSON line each, in
BENCH_DIR/<latency>/<scenario>.<client>.<round>.json, the hub's CPU seconds during that
run in ….hub, the run's counts and window in BENCH_DIR/<latency>/params.json) and prints
medians, ranges and ratios, then how acknowledged publishes compare at each round trip.

Environment: BENCH_DIR, LATENCIES, REPEAT, REPRODUCE, COMMIT, CPUS, CPU_MODEL, LOAD_BEFORE,
LOAD_AFTER, RUSTC, PYTHON. Exit code 0 always: the figures are reported, never judged
(the driver's exit code says whether a run broke).
"""

import json
import os
import statistics

# (scenario, client) pairs of a run; the CLI has one scenario, compared with the SDK's
# acknowledged publishes.
RUNS = (('publish_ack', 'benchlink'), ('publish_ack', 'sdk'), ('burst', 'benchlink'),
        ('burst', 'sdk'), ('cli', 'cli'),
        ('publish_noack', 'benchlink'), ('publish_noack', 'sdk'),
        ('subscribe', 'benchlink'), ('subscribe', 'sdk'),
        ('publish_ack', 'async'), ('publish_noack', 'async'), ('subscribe', 'async'))
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
                     for s, c in RUNS}

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

    def ratio(self, s, key, ours=None):
        """benchlink's median over the SDK's; `ours` (scenario, client) instead of
        benchlink's run of `s`."""
        a = self.median(*(ours or (s, 'benchlink')), key=key)
        b = self.median(s, 'sdk', key)
        return '{:.2f}×'.format(a / b) if a is not None and b else 'n/a'

    def row(self, label, s, key, spec, ratio=True, prefixes=('', '')):
        return (label,
                self.cell(s, 'benchlink', key, spec, prefixes[0]),
                self.cell(s, 'sdk', key, spec, prefixes[1]),
                self.ratio(s, key) if ratio else '')

    def cli_row(self, label, key, spec, ratio=True):
        """The CLI's figure in benchlink's column, beside the SDK library's acknowledged
        publishes."""
        return (label, self.cell('cli', 'cli', key, spec), '',
                self.ratio('publish_ack', key, ours=('cli', 'cli')) if ratio else '')

    def async_row(self, label, s, key, spec, prefix=''):
        """The async client's figure in benchlink's column, beside the SDK's of the same
        scenario; the label says how it compares with the blocking client's."""
        a, b = self.median(s, 'async', key), self.median(s, 'benchlink', key)
        versus = ' (%.2f× the blocking client)' % (a / b) if a is not None and b else ''
        return (label + versus, self.cell(s, 'async', key, spec, prefix),
                self.cell(s, 'sdk', key, spec), self.ratio(s, key, ours=(s, 'async')))

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


def link(latency):
    return ('loopback' if latency == 0 else
            'a %d ms round trip (each direction delayed %d ms)' % (2 * latency, latency))


def table(runs, p, full_rate):
    """One round trip's table and notes; `p` its params.json, `full_rate` benchlink's
    loopback rate of acknowledged publishes in this run (None when not measured)."""
    subs = (runs.sub_prefix('benchlink'), runs.sub_prefix('sdk'))
    rows = [
        runs.row('publish with acks, window %s (msgs/s)' % '{:,}'.format(p['window']),
                 'publish_ack', 'rate', RATE),
        runs.row('burst: %s acknowledged publishes, no window, from a standing start '
                 '(connecting included; msgs/s)' % '{:,}'.format(p['burst']), 'burst', 'rate',
                 RATE),
        runs.cli_row('CLI `rtm --jsonl publish` from stdin, acks, window %s, whole '
                     'command (msgs/s; ratio: to the SDK\'s acked publishes)'
                     % '{:,}'.format(max(p['window'], 20000)), 'rate', RATE),
        runs.row('publish without acks (msgs/s)', 'publish_noack', 'rate', RATE),
        runs.row('subscription receive (msgs/s)', 'subscribe', 'rate', RATE, prefixes=subs),
        runs.async_row('async (tokio): publish with acks (msgs/s)', 'publish_ack', 'rate', RATE),
        runs.async_row('async (tokio): publish without acks (msgs/s)', 'publish_noack', 'rate',
                       RATE),
        runs.async_row('async (tokio): subscription receive (msgs/s)', 'subscribe', 'rate', RATE,
                       prefix=runs.sub_prefix('async')),
        runs.row('**client CPU per acked publish (µs)**', 'publish_ack', 'cpu_us_per_msg', US),
        runs.row('… of which system (µs)', 'publish_ack', 'cpu_sys_us_per_msg', US),
        runs.cli_row('CLI CPU per acked publish, whole command (µs)', 'cpu_us_per_msg', US),
        runs.row('client CPU per publish without ack (µs)', 'publish_noack',
                 'cpu_us_per_msg', US),
        runs.row('client CPU per received message (µs)', 'subscribe', 'cpu_us_per_msg', US),
        runs.async_row('async (tokio): CPU per acked publish (µs)', 'publish_ack',
                       'cpu_us_per_msg', US),
        runs.async_row('async (tokio): CPU per received message (µs)', 'subscribe',
                       'cpu_us_per_msg', US),
        runs.row('client peak memory, acked publishes (MiB)', 'publish_ack', 'peak_rss_mib',
                 MIB),
        runs.row('client peak memory, burst (MiB)', 'burst', 'peak_rss_mib', MIB),
        runs.row('hub CPU per acked publish (µs)', 'publish_ack', 'hub_us_per_msg', US,
                 ratio=False),
        runs.row('hub CPU per publish without ack (µs)', 'publish_noack', 'hub_us_per_msg', US,
                 ratio=False),
        runs.row('hub CPU per received message, publishing included (µs)', 'subscribe',
                 'hub_us_per_msg', US, ratio=False),
    ]
    print('| one connection, %s, one hub | benchlink | SDK 1.5.0 | benchlink / SDK |'
          % link(p['latency']))
    print('|---|---|---|---|')
    for r in rows:
        print('| %s | %s | %s | %s |' % r)
    print()
    notes = [
        '{:,} messages per scenario for benchlink (its CLI: {:,}), {:,} for the SDK, about '
        '70 bytes of JSON each; median (min–max) of the rounds.'.format(
            p['count'], p['cli_count'], p['sdk_count']),
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
    seconds = {c: runs.values('burst', c, 'seconds') for c in ('benchlink', 'sdk')}
    if seconds['benchlink']:
        rtt = 2 * p['latency'] / 1000.0
        text = ('Burst of {:,}: benchlink {} s (connected after {} s), the SDK {} s'.format(
            p['burst'], '/'.join('%.3f' % x for x in seconds['benchlink']),
            '/'.join('%.3f' % x for x in runs.values('burst', 'benchlink', 'connect_seconds')),
            '/'.join('%.3f' % x for x in seconds['sdk']) or 'n/a'))
        if full_rate and rtt > 0:
            bound = 3 * rtt + p['burst'] / full_rate
            text += ('; the bound without a count, three round trips plus {:,} at the loopback '
                     'rate of {:,.0f}/s, is {:.3f} s: benchlink at {:.2f}× it (median)'.format(
                         p['burst'], full_rate, bound,
                         statistics.median(seconds['benchlink']) / bound))
        notes.append(text + '.')
    failed = runs.failures()
    if failed:
        notes.append('**Failed:** ' + '; '.join('%s %s: %s' % f for f in failed))
    print('- ' + '\n- '.join(notes))
    print()


def main():
    env = os.environ
    rounds = int(env['REPEAT'])
    summary = []
    full_rate = None
    for latency in env['LATENCIES'].split():
        directory = os.path.join(env['BENCH_DIR'], latency)
        with open(os.path.join(directory, 'params.json')) as f:
            p = json.load(f)
        runs = Runs(directory, rounds)
        if p['latency'] == 0:
            full_rate = runs.median('publish_ack', 'benchlink', 'rate')
        # A caption, not a heading: the tables go into a README section as they are.
        print('**%s**\n' % link(p['latency']).capitalize())
        table(runs, p, full_rate)
        summary.append('%d ms: library %s (burst %s), CLI %s' % (
            2 * p['latency'], runs.ratio('publish_ack', 'rate'), runs.ratio('burst', 'rate'),
            runs.ratio('publish_ack', 'rate', ours=('cli', 'cli'))))
    notes = [
        'Acknowledged publishes, benchlink over the SDK, by round trip: %s.'
        % '; '.join(summary),
        'Both clients keep their window full (one more publish per acknowledgement); the rate '
        'of acknowledged publishes is at most the window over the round trip.',
        '%d round(s), the clients taking turns; one hub per round trip.' % rounds,
        'CPU: user + system time of the client process (hub: of the hub process) over the '
        'measured interval, from /proc/<pid>/stat (10 ms ticks; the CLI: bash `time` of the '
        'whole command); lower is better.',
        'Machine: %s CPUs (%s), shared; load average %s before, %s after; %s; %s; commit %s.' % (
            env['CPUS'], env['CPU_MODEL'], env['LOAD_BEFORE'], env['LOAD_AFTER'], env['RUSTC'],
            env['PYTHON'], env['COMMIT']),
        'Reproduce: `%s`' % env['REPRODUCE'],
    ]
    print('- ' + '\n- '.join(notes))


if __name__ == '__main__':
    main()
