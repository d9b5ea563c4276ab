"""Scenario (c): a push consumer subscribed with --expression (e.g. "TagA || TagC") while
messages tagged TagA, TagB and TagC are sent in turn. Writes "sent" and "recv" lines, lingering
--linger-s after the last expected delivery so that a message of another tag would show."""

import harness

TAGS = ["TagA", "TagB", "TagC"]


def add_arguments(parser):
    parser.add_argument("--expression", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--linger-s", type=float, default=3.0)


def main():
    args = harness.parse_args(add_arguments)
    wanted = {t.strip() for t in args.expression.split("||")}
    producer = harness.start_producer(args)
    consumer, inbox = harness.start_push_consumer(args, args.expression)
    harness.wait_until_consuming(args, producer, inbox, sorted(wanted)[0])
    expected = set()
    for i in range(args.count):
        key, tags = "msg-%d" % i, TAGS[i % len(TAGS)]
        harness.send_sync(producer, harness.message(args.topic, key, tags, "body %d" % i),
                          keys=key, tags=tags)
        if tags in wanted:
            expected.add(key)
    if not inbox.wait_for(lambda d: expected <= {x["keys"] for x in d}, 20.0):
        harness.fail("not every matching message was received")
    inbox.wait_for(lambda d: False, args.linger_s)
    harness.finish(producer)


main()
