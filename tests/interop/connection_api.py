"""The low-level satori.rtm.connection.Connection against a server, without auth:

1. publish_sync each message given on stdin to --channel (prints its position);
2. write(--value) to --kv-channel with a callback, then read_sync it back;
3. read_sync --read-channel (a value the driver wrote before) and --missing-channel
   (never written: None);
4. delete --kv-channel with a callback, then read_sync it (None);
5. publish_sync to --restricted-channel, which must raise with the error reply;
6. subscribe_sync to --channel at the first message's position: the published messages
   are replayed through the delegate's on_subscription_data.

stdout: one {"event": ...} line per step (see main), then {"event": "done"}.
"""

import json
import threading

from satori.rtm.connection import Connection

import _common


class Delegate(object):
    def __init__(self):
        self.messages = []
        self.enough = threading.Event()
        self.wanted = 0
        self.errors = []

    def on_connection_closed(self):
        pass

    def on_internal_error(self, message):
        self.errors.append('internal error: %s' % (message,))
        self.enough.set()

    def on_subscription_data(self, body):
        for message in body['messages']:
            self.messages.append(message)
            _common.emit('message', subscription_id=body.get('subscription_id'),
                         message=message)
        if len(self.messages) >= self.wanted:
            self.enough.set()

    def on_subscription_error(self, subscription_id, body):
        self.errors.append('subscription error: %r' % (body,))
        self.enough.set()

    def on_fast_forward(self, subscription_id, body):
        pass


def main():
    p = _common.parser(__doc__)
    p.add_argument('--kv-channel', required=True)
    p.add_argument('--read-channel', required=True)
    p.add_argument('--missing-channel', required=True)
    p.add_argument('--restricted-channel', required=True)
    p.add_argument('--value', required=True, help='JSON value to write')
    args = p.parse_args()
    _common.watchdog(args.timeout + 2)
    deadline = _common.Deadline(args.timeout)
    messages = _common.read_messages()
    value = json.loads(args.value)

    delegate = Delegate()
    conn = Connection(args.endpoint, args.appkey, delegate=delegate)
    conn.start()
    _common.emit('started')
    try:
        positions = []
        for message in messages:
            positions.append(conn.publish_sync(args.channel, message, timeout=deadline.left()))
            _common.emit('published', position=positions[-1])

        replies = []
        got = threading.Event()

        def on_reply(pdu):
            replies.append(pdu)
            got.set()

        conn.write(args.kv_channel, value, callback=on_reply)
        deadline.wait(got, 'rtm/write reply')
        _common.emit('write', action=replies[-1].get('action'), id=replies[-1].get('id'))
        _common.emit('read', channel=args.kv_channel,
                     message=conn.read_sync(args.kv_channel, timeout=deadline.left()))
        _common.emit('read', channel=args.read_channel,
                     message=conn.read_sync(args.read_channel, timeout=deadline.left()))
        _common.emit('read', channel=args.missing_channel,
                     message=conn.read_sync(args.missing_channel, timeout=deadline.left()))

        got.clear()
        conn.delete(args.kv_channel, callback=on_reply)
        deadline.wait(got, 'rtm/delete reply')
        _common.emit('delete', action=replies[-1].get('action'))
        _common.emit('read', channel=args.kv_channel,
                     message=conn.read_sync(args.kv_channel, timeout=deadline.left()))

        try:
            conn.publish_sync(args.restricted_channel, 'denied?', timeout=deadline.left())
            _common.emit('denied', reply=None)
        except RuntimeError as e:
            reply = e.args[0] if e.args else None
            if not isinstance(reply, dict):
                raise
            _common.emit('denied', reply=reply)

        if positions:
            delegate.wanted = len(messages)
            conn.subscribe_sync(args.channel, {'position': positions[0]},
                                timeout=deadline.left())
            _common.emit('subscribed', position=positions[0])
            deadline.wait(delegate.enough, '%d replayed messages' % len(messages))
        if delegate.errors:
            _common.fail('; '.join(delegate.errors))
    except RuntimeError as e:
        _common.fail('%s' % (e,))
    finally:
        conn.stop()
    _common.emit('done')


if __name__ == '__main__':
    main()
