"""Subscribes (satori.rtm.client, RELIABLE) and prints what arrives.

stdout: {"event": "subscribed"} once the subscription is active, then
{"event": "message", "message": <message>} for each message in arrival order, then
{"event": "done", "count": N} after --count messages. Exits 1 on timeout or failure.
"""

import threading

from satori.rtm.client import make_client, SubscriptionMode

import _common


def main():
    p = _common.parser(__doc__)
    p.add_argument('--count', type=int, required=True)
    args = p.parse_args()
    _common.watchdog(args.timeout + 2)
    deadline = _common.Deadline(args.timeout)
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
                _common.emit('message', message=message)
                if self.count >= args.count:
                    got_all.set()

    observer = Observer()
    with make_client(endpoint=args.endpoint, appkey=args.appkey,
                     auth_delegate=_common.auth_delegate(args)) as client:
        client.subscribe(args.channel, SubscriptionMode.RELIABLE, observer)
        deadline.wait(subscribed, 'subscribe/ok')
        if args.count > 0:
            deadline.wait(got_all, '%d messages (got %d)' % (args.count, observer.count))
        if failed:
            _common.fail('subscription failed: %r' % (failed[0],))
        _common.emit('done', count=observer.count)


if __name__ == '__main__':
    main()
