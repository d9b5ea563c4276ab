"""Scenario (access control): the producer and the push consumer sign every request with the
session credential given (--access-key/--secret-key); --count messages are sent and each must be
received. Then a producer with a wrong secret and one with no credential (the C++ client then
signs with an empty key) each try one send, which must fail: a "refused" line carries the
client's error text, an "accepted" line would mean the broker let it through."""

import harness


def add_arguments(parser):
    parser.add_argument("--count", type=int, required=True)


def try_send(args, who, access_key, secret_key):
    producer = harness.start_producer(args, "_" + who, access_key, secret_key)
    msg = harness.message(args.topic, "forged-" + who, "TagA", "forged")
    try:
        result = producer.send_sync(msg)
        harness.emit("accepted", who=who, status=int(result.status), msg_id=result.msg_id)
    except Exception as exc:  # the binding raises on any failed send
        harness.emit("refused", who=who, error=str(exc))
    return producer


def main():
    args = harness.parse_args(add_arguments)
    producer = harness.start_producer(args)
    consumer, inbox = harness.start_push_consumer(args, "*")
    harness.wait_until_consuming(args, producer, inbox, "TagA")
    keys = []
    for i in range(args.count):
        key = "signed-%d" % i
        harness.send_sync(producer, harness.message(args.topic, key, "TagA", "signed"), keys=key)
        keys.append(key)
    if not inbox.wait_for(lambda d: set(keys) <= {x["keys"] for x in d}, 20.0):
        harness.fail("not every signed message was received")
    others = [
        try_send(args, "wrong_secret", args.access_key, "not-the-secret"),
        try_send(args, "no_credential", "", ""),
    ]
    # Anything forged that got stored would now reach the consumer.
    inbox.wait_for(lambda d: False, 2.0)
    harness.finish(producer, *others)


main()
