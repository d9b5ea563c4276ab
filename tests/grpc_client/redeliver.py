"""Invisible time and receipt handles with a SimpleConsumer: of N received messages (invisible
duration 10 s, the server minimum) one is NOT acked and must come back with delivery_attempt 2
after the invisible time; another gets change_invisible_duration and is then acked with the
handle the server returned (the SDK stores it in message.receipt_handle), and must not come back.
The rest are acked at once.

    python redeliver.py --endpoint 127.0.0.1:8081 --topic T --group G

JSON result (stdout):
  {"ok", "scenario": "redeliver", "run_id", "elapsed_s", "topic", "group", "invisible_s",
   "sent": [{"index", "message_id", ...}],
   "first_deliveries": [<message>],                      # message = see produce_consume.py
   "unacked": {"message_id", "first_attempt", "redelivered": bool, "redelivery_attempt",
               "redelivered_after_s", "ack_error"},
   "changed": {"message_id", "change_to_s", "old_handle", "new_handle", "handle_changed",
               "change_error", "stale_ack": null | {"rejected": bool, "error"}, "ack_error"},
   "unexpected_redeliveries": [<message>], "ack_errors": [...], "foreign": n}
"""

import sys
import time

from harness import Harness, HarnessError, log


def main(h, a):
    from rocketmq import Message

    consumer = h.simple_consumer(a.group, {a.topic: h.filter_expression("*")}, a.await_duration)
    producer = h.producer([a.topic])

    h.phase(f"sending {a.count} messages")
    sent = []
    h.partial["sent"] = sent
    for i in range(a.count):
        m = Message()
        m.topic = a.topic
        m.body = f"{h.run_id}:{i}".encode()
        m.tag = "redeliver"
        m.keys = f"{h.run_id}-k{i}"
        try:
            receipt = producer.send(m)
        except Exception as e:
            raise HarnessError(f"send #{i} failed: {type(e).__name__}: {e}") from e
        sent.append({"index": i, **h.receipt_dict(receipt)})

    def ours(msg):
        body = (msg.body or b"").decode("utf-8", "replace")
        if body.startswith(h.run_id + ":"):
            return int(body.split(":")[1])
        return None

    h.phase(f"first receive of {a.count} messages (invisible {a.invisible}s)")
    first, by_index, ack_errors, unexpected = [], {}, [], []
    h.partial.update(first_deliveries=first, ack_errors=ack_errors, unexpected_redeliveries=unexpected)
    foreign = 0
    deadline = h.deadline_in(a.consume_timeout)
    while len(by_index) < a.count and time.monotonic() < deadline:
        for msg in h.receive(consumer, a.batch, a.invisible):
            index = ours(msg)
            if index is None:
                foreign += 1
                consumer.ack(msg)
                continue
            if index in by_index:
                unexpected.append(h.message_dict(msg, index=index, note="second delivery during first receive"))
                consumer.ack(msg)
                continue
            by_index[index] = (msg, time.monotonic())
            first.append(h.message_dict(msg, index=index))
    if len(by_index) < a.count:
        raise HarnessError(f"only {len(by_index)} of {a.count} messages arrived within {a.consume_timeout}s")

    # Index 0 stays un-acked; index 1 gets a new invisible time and is acked with the new handle.
    held_msg, held_at = by_index[0]
    changed_msg, _ = by_index[1]
    h.phase("change_invisible_duration + ack with the returned handle")
    changed = {"message_id": changed_msg.message_id, "change_to_s": a.change_to,
               "old_handle": changed_msg.receipt_handle}
    h.partial["changed"] = changed
    changed_at = time.monotonic()
    try:
        consumer.change_invisible_duration(changed_msg, a.change_to)
        changed["change_error"] = None
    except Exception as e:
        changed["change_error"] = f"{type(e).__name__}: {e}"
    changed["new_handle"] = changed_msg.receipt_handle
    changed["handle_changed"] = changed["new_handle"] != changed["old_handle"]
    changed["stale_ack"] = None
    if a.stale_ack_check and changed["change_error"] is None:
        new_handle = changed_msg.receipt_handle
        changed_msg.receipt_handle = changed["old_handle"]
        try:
            consumer.ack(changed_msg)
            changed["stale_ack"] = {"rejected": False, "error": None}
        except Exception as e:
            changed["stale_ack"] = {"rejected": True, "error": f"{type(e).__name__}: {e}"}
        changed_msg.receipt_handle = new_handle
    try:
        consumer.ack(changed_msg)
        changed["ack_error"] = None
    except Exception as e:
        changed["ack_error"] = f"{type(e).__name__}: {e}"
    for index in range(2, a.count):
        msg = by_index[index][0]
        try:
            consumer.ack(msg)
        except Exception as e:
            ack_errors.append({"message_id": msg.message_id, "error": f"{type(e).__name__}: {e}"})

    h.phase(f"waiting for the un-acked message to come back (invisible {a.invisible}s)")
    unacked = {"message_id": held_msg.message_id, "first_attempt": held_msg.delivery_attempt,
               "redelivered": False, "redelivery_attempt": None, "redelivered_after_s": None,
               "ack_error": None}
    h.partial["unacked"] = unacked
    back_deadline = h.deadline_in(a.invisible + a.redeliver_timeout)
    # After the held message is back, keep receiving until the changed one would have become
    # visible again (had its ack been lost), to see that it does not return.
    linger_until = changed_at + a.change_to + a.linger
    while time.monotonic() < back_deadline:
        if unacked["redelivered"] and time.monotonic() >= min(linger_until, back_deadline):
            break
        for msg in h.receive(consumer, a.batch, a.invisible):
            index = ours(msg)
            if index is None:
                foreign += 1
                consumer.ack(msg)
                continue
            if index == 0 and not unacked["redelivered"]:
                unacked.update(redelivered=True, redelivery_attempt=msg.delivery_attempt,
                               redelivered_after_s=round(time.monotonic() - held_at, 3))
                log(f"un-acked message back after {unacked['redelivered_after_s']}s, "
                    f"attempt {msg.delivery_attempt}")
            else:
                unexpected.append(h.message_dict(msg, index=index))
            try:
                consumer.ack(msg)
            except Exception as e:
                if index == 0:
                    unacked["ack_error"] = f"{type(e).__name__}: {e}"
                else:
                    ack_errors.append({"message_id": msg.message_id, "error": f"{type(e).__name__}: {e}"})

    errors = []
    if not unacked["redelivered"]:
        errors.append(f"un-acked message did not come back within {a.invisible + a.redeliver_timeout}s")
    else:
        if unacked["redelivery_attempt"] != a.expect_attempt:
            errors.append(f"redelivered with delivery_attempt {unacked['redelivery_attempt']}, "
                          f"expected {a.expect_attempt}")
        if unacked["redelivered_after_s"] < a.invisible - 1.0:
            errors.append(f"redelivered after {unacked['redelivered_after_s']}s, before the "
                          f"{a.invisible}s invisible time ran out")
        if unacked["ack_error"]:
            errors.append(f"ack of the redelivered message failed: {unacked['ack_error']}")
    if first and any(d["delivery_attempt"] != 1 for d in first):
        errors.append("a first delivery had delivery_attempt != 1")
    if changed["change_error"]:
        errors.append(f"change_invisible_duration failed: {changed['change_error']}")
    if changed["ack_error"]:
        errors.append(f"ack after change_invisible_duration failed: {changed['ack_error']}")
    if a.expect_stale_rejected and changed["stale_ack"] and not changed["stale_ack"]["rejected"]:
        errors.append("ack with the pre-change receipt handle was accepted")
    if unexpected:
        errors.append(f"{len(unexpected)} unexpected (re)deliveries")
    if ack_errors:
        errors.append(f"{len(ack_errors)} acks failed")
    result = {
        "ok": not errors, "topic": a.topic, "group": a.group, "invisible_s": a.invisible,
        "sent": sent, "first_deliveries": first, "unacked": unacked, "changed": changed,
        "unexpected_redeliveries": unexpected, "ack_errors": ack_errors, "foreign": foreign,
    }
    if errors:
        result["error"] = "; ".join(errors)
    return result


if __name__ == "__main__":
    h = Harness("redeliver", __doc__.split("\n\n")[0], default_timeout=120)
    h.add_argument("--topic", default="TopicTest")
    h.add_argument("--group", default="GID_ringmq_py5_redeliver")
    h.add_argument("--count", type=int, default=3, help="messages to send (>= 2)")
    h.add_argument("--invisible", type=int, default=10, help="invisible duration on receive, seconds")
    h.add_argument("--change-to", type=int, default=10,
                   help="new invisible duration given by change_invisible_duration, seconds")
    h.add_argument("--expect-attempt", type=int, default=2, help="delivery_attempt expected on redelivery")
    h.add_argument("--batch", type=int, default=16)
    h.add_argument("--await-duration", type=int, default=5, help="SimpleConsumer long-polling time, seconds")
    h.add_argument("--consume-timeout", type=float, default=30, help="bound on the first receive phase")
    h.add_argument("--redeliver-timeout", type=float, default=20,
                   help="how long past the invisible time to wait for the redelivery")
    h.add_argument("--linger", type=float, default=2,
                   help="seconds past the changed message's new invisible time to watch for it")
    h.add_argument("--stale-ack-check", action="store_true",
                   help="first try to ack the changed message with its old handle (recorded in changed.stale_ack)")
    h.add_argument("--expect-stale-rejected", action="store_true",
                   help="fail if the ack with the old handle was accepted (needs --stale-ack-check)")
    args = h.parse()
    if args.count < 2:
        h.parser.error("--count must be at least 2")
    h.run(main)
    sys.exit(1)  # not reached
