"""Messaging throughput of the reference Python SDK (satori-rtm-sdk 1.5.0) against a
running RTM server: the SDK side of .ci/bench-rtm, the twin of
examples/src/bin/rtm-bench/main.rs (same scenarios, same messages, same JSON report).

    python rtm_sdk_bench.py --endpoint ws://127.0.0.1:8080 --appkey KEY publish-ack [--window W]
    python rtm_sdk_bench.py ... publish-noack
    python rtm_sdk_bench.py ... burst
    python rtm_sdk_bench.py ... subscribe --flood-bin target/release/rtm-bench

Every scenario uses one connection of satori.rtm.client (make_client) and prints one
JSON line on stdout: the rate, and this process's CPU time (user and system, from
/proc/self/stat) over the measured interval, per message.

- publish-ack: `count` calls of client.publish(channel, message, callback=...), the
  SDK's own publish-with-callback loop, with a semaphore keeping at most `window`
  unacknowledged (one more publish as each acknowledgement comes: the window stays
  full); the clock stops at the last acknowledgement.
- publish-noack: `count` publishes without callback, then one with a callback as the
  end marker (the server answers in order, so its reply means all were handled).
- burst: `count` publishes with a callback each, as fast as the SDK takes them (no
  window: its requests in flight have no count limit; its action queue's `Full` is
  retried 1 ms later), from a standing start: the clock starts before make_client and
  stops at the last acknowledgement, so connecting is in the time.
- subscribe: subscribes (SIMPLE mode), then runs `rtm-bench flood` (a raw WebSocket
  publisher in a separate process, the same as for benchlink's own run) to publish
  `count` messages as fast as the server takes them; the rate is the messages
  on_subscription_data saw, first to last.
  Messages the server skipped because the subscriber fell behind are `dropped`.

Exit code 0 when every publish was acknowledged with success, 1 when anything broke
(connection, a refused or lost publish, a timeout). Rates are reported, never judged.
"""

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time

from satori.rtm.client import SubscriptionMode, make_client

PAD = 'x' * 48  # the same message as rtm-bench's: {"n": i, "pad": PAD}


def cpu_times():
    """User and system CPU seconds of this process (all threads, children excluded)."""
    with open('/proc/self/stat') as f:
        rest = f.read().rsplit(')', 1)[1].split()
    tick = float(os.sysconf('SC_CLK_TCK'))
    # rest[0] is field 3 (state); utime is field 14, stime field 15.
    return int(rest[14 - 3]) / tick, int(rest[15 - 3]) / tick


def peak_rss_mib():
    """Peak resident memory of this process so far, in MiB (VmHWM)."""
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmHWM:'):
                return int(line.split()[1]) / 1024.0
    return float('nan')


class Meter(object):
    def __init__(self):
        self.cpu = cpu_times()
        self.wall = time.monotonic()

    def elapsed(self):
        return time.monotonic() - self.wall

    def report(self, scenario, messages, seconds, **extra):
        user, sys_ = cpu_times()
        user, sys_ = user - self.cpu[0], sys_ - self.cpu[1]
        per = lambda s: s * 1e6 / max(messages, 1)
        r = {
            'client': 'sdk',
            'scenario': scenario,
            'messages': messages,
            'seconds': seconds,
            'rate': messages / max(seconds, 1e-9),
            'cpu_user_s': user,
            'cpu_sys_s': sys_,
            'cpu_us_per_msg': per(user + sys_),
            'cpu_sys_us_per_msg': per(sys_),
            'peak_rss_mib': peak_rss_mib(),
        }
        r.update(extra)
        return r


class Failed(Exception):
    pass


class Acks(object):
    """Counts publish replies and bounds those in flight to `window` with a counting
    semaphore: each reply makes room for one more publish (the same rule as the Rust
    side), so the window stays full and, across a slow link, the round trip bounds the
    rate."""

    def __init__(self, window):
        self.room = threading.Semaphore(window)
        self.lock = threading.Lock()
        self.done = 0
        self.failed = 0
        self.first_failure = None
        self.all_done = threading.Event()
        self.expected = None

    def callback(self, reply):
        # Runs on the SDK's thread.
        with self.lock:
            self.done += 1
            if reply.get('action') != 'rtm/publish/ok':
                self.failed += 1
                if self.first_failure is None:
                    self.first_failure = reply
            if self.expected is not None and self.done >= self.expected:
                self.all_done.set()
        self.room.release()

    def acquire(self, timeout):
        """Room for one more publish: waits while `window` are unacknowledged. False on
        timeout."""
        return self.room.acquire(timeout=timeout)

    def expect(self, n):
        with self.lock:
            self.expected = n
            if self.done >= n:
                self.all_done.set()

    def wait(self, n, deadline):
        self.expect(n)
        if not self.all_done.wait(max(0.0, deadline - time.monotonic())):
            raise Failed('timed out: %d of %d acknowledgements' % (self.done, n))

    def check(self):
        if self.failed:
            raise Failed('%d publishes were not acknowledged with success, the first: %r'
                         % (self.failed, self.first_failure))


def publish(client, channel, n, deadline, callback=None):
    """client.publish, retried 1 ms later while the SDK's request queue is full (it
    refuses a request at once when max_queue_size, 20000, are waiting). Returns how many
    retries it took."""
    retries = 0
    while True:
        try:
            client.publish(channel, {'n': n, 'pad': PAD}, callback=callback)
            return retries
        except queue.Full:
            if time.monotonic() > deadline:
                raise Failed('publish %d: the request queue stayed full' % n)
            retries += 1
            time.sleep(0.001)


def channel_name(args, what):
    return '%s.%d.%s' % (args.channel_prefix, os.getpid(), what)


def connect(args, window=0):
    # A window deeper than the default queue gets a queue as deep (as benchlink's side).
    return make_client(endpoint=args.endpoint, appkey=args.appkey,
                       max_queue_size=max(window, 20000))


def publish_ack(args):
    channel = channel_name(args, 'ack')
    deadline = time.monotonic() + args.timeout
    acks = Acks(args.window)
    full = 0
    with connect(args, args.window) as client:
        meter = Meter()
        for n in range(args.count):
            if not acks.acquire(timeout=max(0.0, deadline - time.monotonic())):
                raise Failed('timed out waiting for room in the window (%d acks)' % acks.done)
            full += publish(client, channel, n, deadline, acks.callback)
        acks.wait(args.count, deadline)
        report = meter.report('publish_ack', args.count, meter.elapsed(),
                              window=args.window, full_retries=full)
    acks.check()
    return report


def burst(args):
    channel = channel_name(args, 'burst')
    deadline = time.monotonic() + args.timeout
    acks = Acks(1)
    full = 0
    meter = Meter()
    with connect(args) as client:
        connected = meter.elapsed()
        for n in range(args.count):
            full += publish(client, channel, n, deadline, acks.callback)
        acks.wait(args.count, deadline)
        report = meter.report('burst', args.count, meter.elapsed(),
                              connect_seconds=connected, full_retries=full)
    acks.check()
    return report


def publish_noack(args):
    channel = channel_name(args, 'noack')
    deadline = time.monotonic() + args.timeout
    acks = Acks(1)
    full = 0
    with connect(args) as client:
        meter = Meter()
        for n in range(args.count):
            full += publish(client, channel, n, deadline)
        full += publish(client, channel, args.count, deadline, acks.callback)
        acks.wait(1, deadline)
        report = meter.report('publish_noack', args.count, meter.elapsed(), full_retries=full)
    acks.check()
    return report


class Counter(object):
    """A subscription observer that counts messages and notes when they came."""

    def __init__(self):
        self.subscribed = threading.Event()
        self.failed = None
        self.messages = 0
        self.first = None
        self.last = None

    def on_enter_subscribed(self):
        self.subscribed.set()

    def on_enter_failed(self, reason):
        self.failed = reason
        self.subscribed.set()

    def on_subscription_data(self, data):
        now = time.monotonic()
        if self.first is None:
            self.first = now
        self.last = now
        self.messages += len(data['messages'])

    # The SDK calls every observer method; the others do nothing.
    def __getattr__(self, name):
        if name.startswith('on_'):
            return lambda *a, **k: None
        raise AttributeError(name)


def subscribe(args):
    if not args.flood_bin:
        raise Failed('subscribe needs --flood-bin (the rtm-bench binary)')
    channel = channel_name(args, 'sub')
    counter = Counter()
    with connect(args) as client:
        client.subscribe(channel, SubscriptionMode.SIMPLE, counter)
        if not counter.subscribed.wait(10):
            raise Failed('not subscribed within 10 s')
        if counter.failed is not None:
            raise Failed('subscription failed: %s' % counter.failed)
        meter = Meter()
        flood = subprocess.run(
            [args.flood_bin, '--endpoint', args.endpoint, '--appkey', args.appkey,
             '--count', str(args.count), '--timeout', str(int(args.timeout)),
             'flood', '--channel', channel],
            stdout=subprocess.PIPE, universal_newlines=True)
        if flood.returncode != 0:
            raise Failed('the flood publisher failed (exit %d)' % flood.returncode)
        try:
            publisher = json.loads(flood.stdout.strip())
        except ValueError:
            publisher = {}
        # Every message is now queued for us or was skipped: count until all came or
        # the subscription stayed quiet for `idle` seconds.
        expected = args.count + 1  # with the flood's end marker
        quiet = (time.monotonic(), counter.messages)
        while counter.messages < expected:
            time.sleep(0.005)
            now = counter.messages
            if now != quiet[1]:
                quiet = (time.monotonic(), now)
            elif time.monotonic() - quiet[0] >= args.idle:
                break
        received = counter.messages
        if received == 0:
            raise Failed('the subscription received nothing')
        span = counter.last - counter.first
        report = meter.report('subscribe', received, span, published=expected,
                              dropped=max(0, expected - received),
                              publisher_rate=publisher.get('rate'))
        # The first message only starts the clock.
        report['rate'] = (received - 1) / max(span, 1e-9)
    return report


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--endpoint', required=True, help='ws://host:port')
    p.add_argument('--appkey', required=True)
    p.add_argument('--count', type=int, default=50000)
    p.add_argument('--timeout', type=float, default=120.0,
                   help='seconds after which a scenario gives up (and fails)')
    p.add_argument('--channel-prefix', default='bench')
    sub = p.add_subparsers(dest='scenario')
    ack = sub.add_parser('publish-ack')
    ack.add_argument('--window', type=int, default=1000)
    sub.add_parser('publish-noack')
    sub.add_parser('burst')
    s = sub.add_parser('subscribe')
    s.add_argument('--flood-bin', help='the rtm-bench binary (its `flood` publishes)')
    s.add_argument('--idle', type=float, default=1.0,
                   help='seconds without data, after the publisher finished, before counting ends')
    args = p.parse_args()
    scenarios = {'publish-ack': publish_ack, 'publish-noack': publish_noack,
                 'burst': burst, 'subscribe': subscribe}
    if args.scenario not in scenarios:
        p.error('a scenario is required: %s' % ', '.join(sorted(scenarios)))
    # Never outlive the timeout, even with SDK threads stuck.
    watchdog = threading.Timer(args.timeout + 15, lambda: os._exit(3))
    watchdog.daemon = True
    watchdog.start()
    try:
        report = scenarios[args.scenario](args)
    except Exception as e:  # report what broke on stdout too, for the driver's table
        sys.stderr.write('rtm_sdk_bench: error: %s\n' % (e,))
        print(json.dumps({'client': 'sdk', 'error': str(e)}))
        sys.stdout.flush()
        os._exit(1)
    print(json.dumps(report))
    sys.stdout.flush()


if __name__ == '__main__':
    main()
