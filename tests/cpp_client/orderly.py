"""Scenario (b): --orders orders of --steps steps each are sent interleaved with send_orderly,
an order's steps all to queue (order id % queue count); an orderly push consumer receives them.
Writes "sent" and "recv" lines; the test checks each order's steps arrive in order, once each,
from that order's queue."""

import harness


def add_arguments(parser):
    parser.add_argument("--orders", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)


def main():
    args = harness.parse_args(add_arguments)
    producer = harness.start_producer(args)
    consumer, inbox = harness.start_push_consumer(args, "*", orderly=True)
    harness.wait_until_consuming(args, producer, inbox, "Order")
    keys = []
    for step in range(args.steps):
        for order in range(args.orders):
            key = "order-%d-step-%d" % (order, step)
            body = "%d:%d" % (order, step)
            result = producer.send_orderly(harness.message(args.topic, key, "Order", body), order)
            harness.emit("sent", status=int(result.status), msg_id=result.msg_id, keys=key,
                         order=order, step=step)
            keys.append(key)
    if not inbox.wait_for(lambda d: set(keys) <= {x["keys"] for x in d}, 20.0):
        harness.fail("not every step was received")
    inbox.wait_for(lambda d: False, 1.0)
    harness.finish(producer)


main()
