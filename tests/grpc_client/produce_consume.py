"""Producer sends N messages (tag, keys, a user property; optionally delayed), then a SimpleConsumer
receives until every expected message arrived (or a deadline), acking each one.

    python produce_consume.py --endpoint 127.0.0.1:8081 --topic T --group G --count 10

JSON result (stdout):
  {"ok", "scenario": "produce_consume", "run_id", "elapsed_s", "topic", "group",
   "sent": [{"index", "message_id", "tag", "keys", "body", "queue", "offset"}],
   "received": [{"message_id", "body", "tag", "keys", "properties", "delivery_attempt",
                 "message_group", "message_type", "topic", "born_timestamp_ms",
                 "delivery_timestamp_ms", "corrupted", "index", "after_send_s"}],   # in arrival order, duplicates included
   "expected": n, "distinct": n, "duplicates": n, "missing": [message_id], "unexpected": [message_id],
   "mismatches": [...], "early": [...], "foreign": n, "foreign_messages": [<message>],
   "ack_errors": [...], "receive_calls": n}
Only messages of this run (body "<run_id>:<i>...") are checked; others ("foreign") are acked
and counted.
"""

import sys
import time

from harness import Harness, HarnessError, log


def main(h, a):
    from rocketmq import Message

    tags = [t for t in a.tags.split(",") if t] or [None]
    props = {}
    for item in a.property:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise HarnessError(f"--property {item!r} is not key=value")
        props[key] = value
    filt = h.filter_expression(a.filter, a.filter_type)

    def matches_filter(tag):
        if a.filter_type.upper() != "TAG" or a.filter.strip() in ("", "*"):
            return True
        return tag in {t.strip() for t in a.filter.split("||")}

    consumer = h.simple_consumer(a.group, {a.topic: filt}, a.await_duration)
    if a.prime:
        h.phase("priming receive (before producing)")
        for m in h.receive(consumer, a.batch, a.invisible):
            consumer.ack(m)
    producer = h.producer([a.topic])

    h.phase(f"sending {a.count} messages")
    sent, by_id, expected_ids = [], {}, set()
    h.partial["sent"] = sent
    for i in range(a.count):
        m = Message()
        m.topic = a.topic
        m.body = (f"{h.run_id}:{i}:" + "x" * max(0, a.body_size)).encode()
        tag = tags[i % len(tags)]
        if tag:
            m.tag = tag
        keys = [f"{h.run_id}-k{i}", f"{h.run_id}-k{i}-b"][:a.keys_per_message]
        for k in keys:
            m.keys = k  # the SDK's setter adds one key per assignment
        for k, v in props.items():
            m.add_property(k, v)
        m.add_property("index", str(i))
        if a.delay > 0:
            # Seconds since the epoch: the SDK copies it into Timestamp.seconds (its docstring
            # says milliseconds, which would land tens of thousands of years ahead).
            m.delivery_timestamp = int(time.time()) + a.delay
        try:
            receipt = producer.send(m)
        except Exception as e:
            raise HarnessError(f"send #{i} failed: {type(e).__name__}: {e}") from e
        rec = {"index": i, "tag": tag, "keys": keys, "body": m.body.decode()[:64],
               "sent_at": time.time(), **h.receipt_dict(receipt)}
        if a.delay > 0:
            rec["delivery_at"] = m.delivery_timestamp
        sent.append(rec)
        by_id[receipt.message_id] = rec
        if matches_filter(tag):
            expected_ids.add(receipt.message_id)
    expected = a.expect if a.expect is not None else len(expected_ids)
    log(f"sent {len(sent)}; expecting {expected}")

    h.phase("receiving")
    received, seen, ack_errors, mismatches, early = [], {}, [], [], []
    h.partial.update(received=received, ack_errors=ack_errors)
    foreign = 0
    foreign_messages = []
    calls = 0
    deadline = h.deadline_in(a.consume_timeout + max(0, a.delay))
    done_at = None
    while time.monotonic() < deadline:
        if done_at is not None and time.monotonic() >= done_at + a.linger:
            break
        calls += 1
        for msg in h.receive(consumer, a.batch, a.invisible):
            body = (msg.body or b"").decode("utf-8", "replace")
            if not body.startswith(h.run_id + ":"):
                foreign += 1
                if len(foreign_messages) < a.foreign_expect:
                    foreign_messages.append(h.message_dict(msg))
            else:
                index = int(body.split(":")[1])
                src = sent[index] if index < len(sent) else None
                d = h.message_dict(msg, index=index,
                                   after_send_s=round(time.time() - src["sent_at"], 3) if src else None)
                d["body"] = d["body"][:64]
                received.append(d)
                seen[msg.message_id] = seen.get(msg.message_id, 0) + 1
                if src is not None:
                    want = {"tag": src["tag"], "keys": sorted(src["keys"]),
                            "message_id": src["message_id"]}
                    got = {"tag": msg.tag, "keys": sorted(msg.keys), "message_id": msg.message_id}
                    want_props = dict(props, index=str(index))
                    if want != got or dict(msg.properties) != want_props:
                        mismatches.append({"index": index, "want": dict(want, properties=want_props),
                                           "got": dict(got, properties=dict(msg.properties))})
                    if a.delay > 0 and time.time() < src["delivery_at"] - 1.0:
                        early.append({"index": index, "message_id": msg.message_id,
                                      "early_by_s": round(src["delivery_at"] - time.time(), 3)})
            if not a.no_ack:
                try:
                    consumer.ack(msg)
                except Exception as e:
                    ack_errors.append({"message_id": msg.message_id, "error": f"{type(e).__name__}: {e}"})
        if done_at is None and len(expected_ids & set(seen)) >= expected and foreign >= a.foreign_expect:
            done_at = time.monotonic()
            log(f"all {expected} expected messages arrived; lingering {a.linger}s")

    distinct_ours = set(seen)
    missing = sorted(expected_ids - distinct_ours) if a.expect is None else []
    unexpected = sorted(i for i in distinct_ours if i not in expected_ids)
    duplicates = sum(n - 1 for n in seen.values())
    got_expected = len(expected_ids & distinct_ours) if a.expect is None else len(distinct_ours)
    ok = (got_expected >= expected and foreign >= a.foreign_expect and not missing and not unexpected and not ack_errors
          and not mismatches and not early
          and not any(r["corrupted"] for r in received)
          and not (a.fail_on_duplicates and duplicates))
    errors = []
    if got_expected < expected:
        errors.append(f"received {got_expected} of {expected} expected messages")
    if foreign < a.foreign_expect:
        errors.append(f"received {foreign} of {a.foreign_expect} messages sent by others")
    if unexpected:
        errors.append(f"{len(unexpected)} messages arrived that the filter should have dropped")
    if ack_errors:
        errors.append(f"{len(ack_errors)} acks failed")
    if mismatches:
        errors.append(f"{len(mismatches)} messages differ from what was sent")
    if early:
        errors.append(f"{len(early)} delayed messages arrived early")
    if any(r["corrupted"] for r in received):
        errors.append("the SDK marked messages corrupted (body digest mismatch)")
    if a.fail_on_duplicates and duplicates:
        errors.append(f"{duplicates} duplicate deliveries")
    result = {
        "ok": ok, "topic": a.topic, "group": a.group, "sent": sent, "received": received,
        "expected": expected, "distinct": len(distinct_ours), "duplicates": duplicates,
        "missing": missing, "unexpected": unexpected, "mismatches": mismatches, "early": early,
        "foreign": foreign, "foreign_messages": foreign_messages, "ack_errors": ack_errors, "receive_calls": calls,
    }
    if errors:
        result["error"] = "; ".join(errors)
    return result


if __name__ == "__main__":
    h = Harness("produce_consume", __doc__.split("\n\n")[0], default_timeout=90)
    h.add_argument("--topic", default="TopicTest")
    h.add_argument("--group", default="GID_ringmq_py5")
    h.add_argument("--count", type=int, default=10)
    h.add_argument("--tags", default="TagA", help="comma-separated tags, cycled over the messages ('' = no tag)")
    h.add_argument("--keys-per-message", type=int, default=2, choices=(0, 1, 2))
    h.add_argument("--property", action="append", default=None, metavar="KEY=VALUE",
                   help="user property on every message (repeatable; default origin=python5). "
                        "An 'index' property is always added")
    h.add_argument("--body-size", type=int, default=0, help="extra body bytes")
    h.add_argument("--delay", type=int, default=0, help="send as delay messages due in this many seconds")
    h.add_argument("--filter", default="*", help="subscription expression")
    h.add_argument("--filter-type", default="TAG", choices=("TAG", "SQL", "tag", "sql"))
    h.add_argument("--expect", type=int, default=None,
                   help="number of distinct messages to wait for (default: the sent ones the TAG filter matches)")
    h.add_argument("--batch", type=int, default=16, help="max messages per receive")
    h.add_argument("--invisible", type=int, default=30, help="invisible duration per receive, seconds")
    h.add_argument("--await-duration", type=int, default=5, help="SimpleConsumer long-polling time, seconds")
    h.add_argument("--consume-timeout", type=float, default=30, help="how long to keep receiving, seconds")
    h.add_argument("--linger", type=float, default=0,
                   help="keep receiving this long after everything arrived, to catch extras")
    h.add_argument("--prime", action="store_true", help="one receive before producing")
    h.add_argument("--no-ack", action="store_true", help="do not ack what arrives")
    h.add_argument("--fail-on-duplicates", action="store_true")
    h.add_argument("--foreign-expect", type=int, default=0,
                   help="also wait for this many messages sent by others (another protocol, say) "
                        "and report them in foreign_messages")
    args = h.parse()
    if args.property is None:
        args.property = ["origin=python5"]
    elif isinstance(args.property, str):  # --json {"property": "k=v"}
        args.property = [args.property]
    if args.count < 0 or args.batch <= 0:
        h.parser.error("--count must be >= 0 and --batch > 0")
    h.run(main)
    sys.exit(1)  # not reached: run() exits
