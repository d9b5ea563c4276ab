"""Scenario (d): the consume callback answers RECONSUME_LATER to the first delivery of every
message keyed "fail-*" and accepts everything else. The C++ client sends each failed message
back to the broker, which redelivers it through the group's retry topic after the retry delay.
Writes "sent" and "recv" lines (with reconsume_times and the decision) until every failed
message came back and was consumed, then lingers --linger-s."""

import harness


def add_arguments(parser):
    parser.add_argument("--failing", type=int, required=True)
    parser.add_argument("--linger-s", type=float, default=2.0)


def on_message(delivery):
    return not ((delivery["keys"] or "").startswith("fail-") and delivery["reconsume_times"] == 0)


def main():
    args = harness.parse_args(add_arguments)
    producer = harness.start_producer(args)
    consumer, inbox = harness.start_push_consumer(args, "*", on_message)
    harness.wait_until_consuming(args, producer, inbox, "TagA")
    keys = ["fail-%d" % i for i in range(args.failing)] + ["ok-0"]
    for key in keys:
        body = "body of %s" % key
        harness.send_sync(producer, harness.message(args.topic, key, "TagA", body, key),
                          keys=key, tags="TagA", body=body, case=key)

    def all_consumed(deliveries):
        done = {d["keys"] for d in deliveries if d["consumed"]}
        return all(k in done for k in keys)

    if not inbox.wait_for(all_consumed, 30.0):
        harness.fail("a message sent back was not redelivered")
    inbox.wait_for(lambda d: False, args.linger_s)
    harness.finish(producer)


main()
