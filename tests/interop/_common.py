"""Shared helpers of the interop scripts (driven by tests/tests/interop_python.rs).

Every script speaks one protocol on stdout: one JSON object per line, each with an
"event" key, flushed at once; diagnostics go to stderr. A script exits 0 when it did
everything it was asked to, 1 otherwise (after an {"event": "error"} line), and never
outlives its --timeout (the Rust driver also kills it after its own deadline).
Set DEBUG_SATORI_SDK=1 to get the SDK's own debug log (PDUs) on stderr.
"""

import argparse
import json
import sys
import threading
import time


def parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument('--endpoint', required=True, help='ws://host:port')
    p.add_argument('--appkey', required=True)
    p.add_argument('--channel', required=True)
    p.add_argument('--timeout', type=float, default=10.0,
                   help='seconds for the whole script')
    p.add_argument('--role', help='authenticate with this role')
    p.add_argument('--secret', help="the role's secret")
    return p


def emit(event, **fields):
    fields['event'] = event
    # ensure_ascii keeps stdout ASCII whatever the locale; the driver parses JSON.
    sys.stdout.write(json.dumps(fields) + '\n')
    sys.stdout.flush()


def fail(why):
    emit('error', error=str(why))
    sys.stderr.write('interop: %s\n' % (why,))
    sys.stderr.flush()
    sys.exit(1)


def read_messages():
    """The messages to send: one JSON value per stdin line."""
    return [json.loads(line) for line in sys.stdin.read().splitlines() if line]


class Deadline(object):
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return max(0.0, self.end - time.monotonic())

    def wait(self, event, what):
        if not event.wait(self.left()):
            fail('timed out waiting for %s' % what)


def watchdog(seconds):
    """Ends the process (even with SDK threads stuck) once `seconds` have passed."""
    def run():
        time.sleep(seconds)
        sys.stderr.write('interop: watchdog: %.1f s passed, exiting\n' % seconds)
        sys.stderr.flush()
        import os
        os._exit(3)
    t = threading.Thread(target=run, name='watchdog')
    t.daemon = True
    t.start()


def auth_delegate(args):
    if args.role is None:
        return None
    from satori.rtm.auth import RoleSecretAuthDelegate
    return RoleSecretAuthDelegate(args.role, args.secret or '')


class Acks(object):
    """Collects request callbacks' replies (PDU dicts) and waits for a count."""

    def __init__(self):
        self.lock = threading.Lock()
        self.replies = {}
        self.done = threading.Event()
        self.expected = None

    def callback(self, index):
        def on_reply(pdu):
            with self.lock:
                self.replies[index] = pdu
                if self.expected is not None and len(self.replies) >= self.expected:
                    self.done.set()
        return on_reply

    def expect(self, n):
        with self.lock:
            self.expected = n
            if len(self.replies) >= n:
                self.done.set()
