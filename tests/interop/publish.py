"""Publishes the messages given on stdin (one JSON value per line) with
satori.rtm.client, each with an ack callback, in order, then waits for every ack.

stdout: {"event": "ack", "index": i, "action": ..., "position": ...} per message in
index order, then {"event": "done", "count": N}. Exits 1 on timeout or on any reply
other than rtm/publish/ok.
"""

from satori.rtm.client import make_client

import _common


def main():
    args = _common.parser(__doc__).parse_args()
    _common.watchdog(args.timeout + 2)
    deadline = _common.Deadline(args.timeout)
    messages = _common.read_messages()
    acks = _common.Acks()
    with make_client(endpoint=args.endpoint, appkey=args.appkey,
                     auth_delegate=_common.auth_delegate(args)) as client:
        for i, message in enumerate(messages):
            client.publish(args.channel, message, callback=acks.callback(i))
        acks.expect(len(messages))
        deadline.wait(acks.done, '%d publish acks' % len(messages))
    bad = 0
    for i in range(len(messages)):
        pdu = acks.replies[i]
        body = pdu.get('body') or {}
        _common.emit('ack', index=i, action=pdu.get('action'), position=body.get('position'),
                     body=body)
        if pdu.get('action') != 'rtm/publish/ok':
            bad += 1
    if bad:
        _common.fail('%d publishes were not acked with rtm/publish/ok' % bad)
    _common.emit('done', count=len(messages))


if __name__ == '__main__':
    main()
