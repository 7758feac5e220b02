"""Drives satori.rtm.client in CBOR mode (protocol='cbor'): one --step per run.

Values cross stdout as JSON, with a CBOR byte string b written as {"$bytes": "<hex>"};
on stdin, {"$bytes": "<hex>"} is turned into bytes before it is sent, so the driver can
publish binary values.

Steps:
- publish: publishes the stdin messages to --channel with acks;
  {"event": "ack", "index": i, "action": ..., "body": ...} each, then {"event": "done"}.
- subscribe: RELIABLE subscription to --channel; {"event": "subscribed"}, then
  {"event": "message", "message": m} for each, {"event": "done"} after --count.
- kv: writes the first stdin value to --channel, reads it back, deletes it, reads
  again; {"event": "write"|"read"|"delete"|"read", "action": ..., "body": ...}.
With --role/--secret the client authenticates first ({"event": "authenticated"}).
Every reply that is not .../ok ends the script with exit 1. A connection that drops
(the failure mode of a server that gets CBOR wrong) is an error too.
"""

import binascii
import threading

from satori.rtm.client import make_client, ClientStateObserver, SubscriptionMode
from satori.rtm.exceptions import AuthError

import _common


def to_json(v):
    if isinstance(v, bytes):
        return {'$bytes': binascii.hexlify(v).decode('ascii')}
    if isinstance(v, dict):
        return dict((k, to_json(x)) for k, x in v.items())
    if isinstance(v, list):
        return [to_json(x) for x in v]
    return v


def from_json(v):
    if isinstance(v, dict):
        if list(v.keys()) == ['$bytes']:
            return binascii.unhexlify(v['$bytes'])
        return dict((k, from_json(x)) for k, x in v.items())
    if isinstance(v, list):
        return [from_json(x) for x in v]
    return v


class Watch(ClientStateObserver):
    """Counts disconnects: a CBOR mix-up shows as the SDK reconnecting."""

    def __init__(self):
        self.disconnects = 0

    def on_leave_connected(self):
        self.disconnects += 1


def request(deadline, what, send):
    """Sends one request with a callback and returns its reply PDU."""
    got = threading.Event()
    replies = []

    def on_reply(pdu):
        replies.append(pdu)
        got.set()

    send(on_reply)
    deadline.wait(got, what)
    return replies[0]


def main():
    p = _common.parser(__doc__)
    p.add_argument('--step', required=True, choices=['publish', 'subscribe', 'kv'])
    p.add_argument('--count', type=int, default=0)
    args = p.parse_args()
    _common.watchdog(args.timeout + 2)
    deadline = _common.Deadline(args.timeout)
    values = [from_json(v) for v in _common.read_messages()]
    watch = Watch()
    try:
        with make_client(endpoint=args.endpoint, appkey=args.appkey, protocol='cbor',
                         auth_delegate=_common.auth_delegate(args),
                         observer=watch) as client:
            if args.role is not None:
                _common.emit('authenticated')
            if args.step == 'publish':
                publish(client, args, deadline, values)
            elif args.step == 'subscribe':
                subscribe(client, args, deadline)
            else:
                kv(client, args, deadline, values[0])
            if watch.disconnects:
                _common.fail('the connection dropped %d times' % watch.disconnects)
    except AuthError as e:
        _common.fail('authentication failed: %s' % (e,))
    _common.emit('done')


def check(event, pdu, ok):
    _common.emit(event, action=pdu.get('action'), body=to_json(pdu.get('body')))
    if pdu.get('action') != ok:
        _common.fail('%s: expected %s, got %r' % (event, ok, pdu))


def publish(client, args, deadline, values):
    acks = _common.Acks()
    for i, message in enumerate(values):
        client.publish(args.channel, message, callback=acks.callback(i))
    acks.expect(len(values))
    deadline.wait(acks.done, '%d publish acks' % len(values))
    for i in range(len(values)):
        check('ack', acks.replies[i], 'rtm/publish/ok')


def subscribe(client, args, deadline):
    got_all = threading.Event()
    subscribed = threading.Event()
    failed = []

    class Observer(object):
        def __init__(self):
            self.count = 0

        def on_enter_subscribed(self):
            _common.emit('subscribed')
            subscribed.set()

        def on_enter_failed(self, reason):
            failed.append(reason)
            subscribed.set()
            got_all.set()

        def on_subscription_data(self, data):
            for message in data['messages']:
                self.count += 1
                _common.emit('message', message=to_json(message))
                if self.count >= args.count:
                    got_all.set()

    observer = Observer()
    client.subscribe(args.channel, SubscriptionMode.RELIABLE, observer)
    deadline.wait(subscribed, 'subscribe/ok')
    if args.count > 0:
        deadline.wait(got_all, '%d messages (got %d)' % (args.count, observer.count))
    if failed:
        _common.fail('subscription failed: %r' % (failed[0],))


def kv(client, args, deadline, value):
    ch = args.channel
    check('write', request(deadline, 'rtm/write reply',
                           lambda cb: client.write(ch, value, callback=cb)), 'rtm/write/ok')
    check('read', request(deadline, 'rtm/read reply',
                          lambda cb: client.read(ch, callback=cb)), 'rtm/read/ok')
    check('delete', request(deadline, 'rtm/delete reply',
                            lambda cb: client.delete(ch, callback=cb)), 'rtm/delete/ok')
    check('read', request(deadline, 'rtm/read reply',
                          lambda cb: client.read(ch, callback=cb)), 'rtm/read/ok')


if __name__ == '__main__':
    main()
