"""Authenticates (make_client with RoleSecretAuthDelegate), publishes the messages
given on stdin to --channel (a restricted one) with acks, writes --value to
--kv-channel and reads it back, all through satori.rtm.client.

stdout: {"event": "authenticated"}, {"event": "ack", ...} per message,
{"event": "write", "action": ...}, {"event": "read", "action": ..., "message": ...},
{"event": "done"}. Exits 1 if auth fails (AuthError), on timeout, or on any error reply.
"""

import json
import threading

from satori.rtm.client import make_client
from satori.rtm.exceptions import AuthError

import _common


def main():
    p = _common.parser(__doc__)
    p.add_argument('--kv-channel', required=True)
    p.add_argument('--value', required=True, help='JSON value to write')
    args = p.parse_args()
    if args.role is None:
        _common.fail('--role is required')
    _common.watchdog(args.timeout + 2)
    deadline = _common.Deadline(args.timeout)
    messages = _common.read_messages()
    value = json.loads(args.value)
    try:
        with make_client(endpoint=args.endpoint, appkey=args.appkey,
                         auth_delegate=_common.auth_delegate(args)) as client:
            _common.emit('authenticated')
            acks = _common.Acks()
            for i, message in enumerate(messages):
                client.publish(args.channel, message, callback=acks.callback(i))
            acks.expect(len(messages))
            deadline.wait(acks.done, '%d publish acks' % len(messages))
            bad = 0
            for i in range(len(messages)):
                pdu = acks.replies[i]
                _common.emit('ack', index=i, action=pdu.get('action'), body=pdu.get('body'))
                bad += pdu.get('action') != 'rtm/publish/ok'
            if bad:
                _common.fail('%d publishes to %s were refused' % (bad, args.channel))

            replies = []
            got = threading.Event()

            def on_reply(pdu):
                replies.append(pdu)
                got.set()

            client.write(args.kv_channel, value, callback=on_reply)
            deadline.wait(got, 'rtm/write reply')
            _common.emit('write', action=replies[0].get('action'), body=replies[0].get('body'))
            got.clear()
            client.read(args.kv_channel, callback=on_reply)
            deadline.wait(got, 'rtm/read reply')
            body = replies[1].get('body') or {}
            _common.emit('read', action=replies[1].get('action'), message=body.get('message'),
                         body=body)
            if replies[0].get('action') != 'rtm/write/ok' or replies[1].get('action') != 'rtm/read/ok':
                _common.fail('write/read failed: %r' % (replies,))
    except AuthError as e:
        _common.fail('authentication failed: %s' % (e,))
    _common.emit('done')


if __name__ == '__main__':
    main()
