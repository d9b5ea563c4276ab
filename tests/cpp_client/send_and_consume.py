"""Scenario (a): a producer sends --count messages with send_sync (text bodies, one above the
C++ client's 4 KiB compression threshold, tags, keys and a user property); a clustering push
consumer started before them must receive each. Writes "sent" and "recv" lines for the test to
compare, lingering --linger-s after the last one so a duplicate would show."""

import harness


def add_arguments(parser):
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--linger-s", type=float, default=1.5)


def body_of(i):
    if i == 3:
        return "big body %d " % i + "0123456789abcdef" * 260  # over 4 KiB: sent compressed
    return "body %d: grüße, 消息 ✓" % i


def main():
    args = harness.parse_args(add_arguments)
    producer = harness.start_producer(args)
    consumer, inbox = harness.start_push_consumer(args, "*")
    harness.wait_until_consuming(args, producer, inbox, "TagA")
    keys = []
    for i in range(args.count):
        key, tags, body, case = "msg-%d" % i, "Tag%d" % (i % 3), body_of(i), "case-%d" % i
        msg = harness.message(args.topic, key, tags, body, case)
        harness.send_sync(producer, msg, keys=key, tags=tags, body=body, case=case)
        keys.append(key)
    if not inbox.wait_for(lambda d: set(keys) <= {x["keys"] for x in d}, 20.0):
        harness.fail("not every message was received")
    inbox.wait_for(lambda d: False, args.linger_s)
    harness.finish(producer)


main()
