"""PushConsumer with a MessageListener that answers FAILURE for chosen messages the first K times
and SUCCESS afterwards; reports every delivery (delivery_attempt, time) per message.

On FAILURE the SDK nacks with ChangeInvisibleDuration(backoff for this delivery_attempt, taken
from the server's Settings customized_backoff list, 1 s when there is none); the server redelivers
with delivery_attempt + 1. (Non-FIFO: the client never forwards to the DLQ itself; with a FIFO
group the SDK retries locally and never nacks; see fifo.py.)

    python push_consumer.py --endpoint 127.0.0.1:8081 --topic T --group G --count 4 --fail-indices 0 --fail-times 2

JSON result (stdout):
  {"ok", "scenario": "push_consumer", "run_id", "elapsed_s", "topic", "group",
   "fifo": bool (from the server's Settings), "sent": [...],
   "messages": [{"index", "message_id", "fail_times", "expected_deliveries", "attempts": [delivery_attempt...],
                 "results": ["FAILURE"|"SUCCESS"...], "gaps_s": [seconds between deliveries], "succeeded": bool}],
   "deliveries_after_success": n, "foreign": n, "listener_errors": [...]}
"""

import sys
import threading
import time

from harness import Harness, HarnessError, log


def main(h, a):
    from rocketmq import ConsumeResult, Message, MessageListener

    fail_indices = {int(x) for x in str(a.fail_indices).split(",") if str(x).strip() != ""}
    lock = threading.Lock()
    state = {}  # index -> {"attempts": [], "results": [], "times": []}
    foreign = [0]
    after_success = [0]
    listener_errors = []
    changed = threading.Event()
    h.partial.update(messages=state, listener_errors=listener_errors)

    def expected_deliveries(index):
        if a.expect_deliveries is not None and index in fail_indices:
            return a.expect_deliveries
        return a.fail_times + 1 if index in fail_indices else 1

    class Listener(MessageListener):
        def consume(self, message):
            try:
                body = (message.body or b"").decode("utf-8", "replace")
                if not body.startswith(h.run_id + ":"):
                    with lock:
                        foreign[0] += 1
                    return ConsumeResult.SUCCESS
                index = int(body.split(":")[1])
                with lock:
                    s = state.setdefault(index, {"message_id": message.message_id, "attempts": [],
                                                 "results": [], "times": []})
                    if "SUCCESS" in s["results"]:
                        after_success[0] += 1
                    n = len(s["attempts"]) + 1
                    result = "FAILURE" if index in fail_indices and n <= a.fail_times else "SUCCESS"
                    s["attempts"].append(message.delivery_attempt)
                    s["results"].append(result)
                    s["times"].append(time.monotonic())
                log(f"delivery: message {index} attempt {message.delivery_attempt} -> {result}")
                changed.set()
                if a.consume_delay > 0:
                    time.sleep(a.consume_delay)
                return ConsumeResult.SUCCESS if result == "SUCCESS" else ConsumeResult.FAILURE
            except Exception as e:  # a listener exception counts as FAILURE in the SDK
                listener_errors.append(f"{type(e).__name__}: {e}")
                return ConsumeResult.FAILURE

    consumer = h.push_consumer(a.group, Listener(), {a.topic: h.filter_expression(a.filter, a.filter_type)},
                               consumption_thread_count=a.threads)
    if a.settle > 0:
        h.phase(f"letting the consumer get its assignment ({a.settle}s)")
        time.sleep(a.settle)
    producer = h.producer([a.topic])

    h.phase(f"sending {a.count} messages")
    sent = []
    h.partial["sent"] = sent
    for i in range(a.count):
        m = Message()
        m.topic = a.topic
        m.body = f"{h.run_id}:{i}".encode()
        m.tag = a.tag
        m.keys = f"{h.run_id}-k{i}"
        try:
            receipt = producer.send(m)
        except Exception as e:
            raise HarnessError(f"send #{i} failed: {type(e).__name__}: {e}") from e
        sent.append({"index": i, **h.receipt_dict(receipt)})

    def complete():
        with lock:
            return all(i in state and len(state[i]["attempts"]) >= expected_deliveries(i)
                       and (state[i]["results"][-1] == "SUCCESS" or a.expect_deliveries is not None)
                       for i in range(a.count))

    h.phase("consuming")
    deadline = h.deadline_in(a.consume_timeout)
    done_at = None
    while time.monotonic() < deadline:
        if done_at is None and complete():
            done_at = time.monotonic()
            log(f"all deliveries seen; lingering {a.linger}s")
        if done_at is not None and time.monotonic() >= done_at + a.linger:
            break
        changed.wait(0.2)
        changed.clear()

    with lock:
        messages, errors = [], []
        for i in range(a.count):
            s = state.get(i, {"message_id": sent[i]["message_id"], "attempts": [], "results": [], "times": []})
            want = expected_deliveries(i)
            rec = {"index": i, "message_id": s["message_id"], "fail_times": a.fail_times if i in fail_indices else 0,
                   "expected_deliveries": want, "attempts": list(s["attempts"]), "results": list(s["results"]),
                   "gaps_s": [round(b - c, 3) for c, b in zip(s["times"], s["times"][1:])],
                   "succeeded": "SUCCESS" in s["results"]}
            messages.append(rec)
            n = len(s["attempts"])
            if n < want:
                errors.append(f"message {i}: {n} deliveries, expected {want}")
            elif n > want:
                errors.append(f"message {i}: {n} deliveries, expected {want} (duplicates)")
            if rec["attempts"][:want] != list(range(1, min(n, want) + 1)):
                errors.append(f"message {i}: delivery_attempt sequence {rec['attempts']}, "
                              f"expected 1..{want}")
        if listener_errors:
            errors.append(f"listener raised: {listener_errors[0]}")
        result = {
            "ok": not errors, "topic": a.topic, "group": a.group, "fifo": consumer.fifo, "sent": sent,
            "messages": messages, "deliveries_after_success": after_success[0], "foreign": foreign[0],
            "listener_errors": listener_errors,
        }
    if errors:
        result["error"] = "; ".join(errors)
    return result


if __name__ == "__main__":
    h = Harness("push_consumer", __doc__.split("\n\n")[0], default_timeout=120)
    h.add_argument("--topic", default="TopicTest")
    h.add_argument("--group", default="GID_ringmq_py5_push")
    h.add_argument("--count", type=int, default=4)
    h.add_argument("--tag", default="push")
    h.add_argument("--filter", default="*")
    h.add_argument("--filter-type", default="TAG", choices=("TAG", "SQL", "tag", "sql"))
    h.add_argument("--fail-indices", default="0", help="comma-separated message indices the listener fails")
    h.add_argument("--fail-times", type=int, default=2, help="K: how many times those fail before succeeding")
    h.add_argument("--expect-deliveries", type=int, default=None,
                   help="deliveries expected for the failing messages when the server caps them "
                        "(max attempts / DLQ); default fail-times + 1")
    h.add_argument("--threads", type=int, default=4, help="consumption_thread_count")
    h.add_argument("--consume-delay", type=float, default=0, help="seconds the listener sleeps per message")
    h.add_argument("--settle", type=float, default=2.0,
                   help="seconds between consumer start and the first send (assignment scan starts after 1 s)")
    h.add_argument("--consume-timeout", type=float, default=60)
    h.add_argument("--linger", type=float, default=2.0, help="seconds to watch for extra deliveries at the end")
    args = h.parse()
    if args.count <= 0 or args.fail_times < 0:
        h.parser.error("--count must be > 0 and --fail-times >= 0")
    h.run(main)
    sys.exit(1)  # not reached
