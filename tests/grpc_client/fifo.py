"""FIFO: a producer sends M messages to each of G message groups (interleaved) on a FIFO topic;
a PushConsumer or SimpleConsumer in an orderly group checks that each group is consumed in send
order. The server decides FIFO mode: the topic needs message.type=FIFO and the consumer group
consumeMessageOrderly=true (Settings.subscription.fifo in the Telemetry reply; the PushConsumer
keeps whatever the FIRST settings reply said).

With --fail-seq S (push only) the listener fails message S of the first group once: the SDK
retries it locally after the backoff (no nack in FIFO mode), and the later messages of that
group must not be consumed before it.

    python fifo.py --endpoint 127.0.0.1:8081 --topic FifoT --group FifoG --groups 3 --per-group 5 --consumer push

JSON result (stdout):
  {"ok", "scenario": "fifo", "run_id", "elapsed_s", "topic", "group", "consumer": "push"|"simple",
   "fifo_mode": bool|null (push: Settings.subscription.fifo; simple: null), "sent": [...],
   "groups": {"<group>": {"consumed": [seq...], "deliveries": [[seq, delivery_attempt, "SUCCESS"|"FAILURE"]...]}},
   "violations": [str], "duplicates": n, "missing": {"<group>": [seq...]}, "foreign": n}
"""

import sys
import threading
import time

from harness import Harness, HarnessError, log


def main(h, a):
    from rocketmq import ConsumeResult, Message, MessageListener

    group_names = [f"{h.run_id}-g{g}" for g in range(a.groups)]
    lock = threading.Lock()
    deliveries = {g: [] for g in group_names}   # [seq, attempt, result]
    consumed = {g: [] for g in group_names}     # successful consumption order
    foreign = [0]
    wrong_group_header = []
    progress = threading.Event()
    h.partial.update(deliveries=deliveries)

    def parse(message):
        body = (message.body or b"").decode("utf-8", "replace")
        if not body.startswith(h.run_id + ":"):
            return None
        _, g, seq = body.split(":")
        name = group_names[int(g)]
        if message.message_group != name:
            wrong_group_header.append({"message_id": message.message_id, "body": body,
                                       "message_group": message.message_group})
        return name, int(seq)

    def record(name, seq, attempt, result):
        with lock:
            deliveries[name].append([seq, attempt, result])
            if result == "SUCCESS":
                consumed[name].append(seq)
        log(f"{name} seq {seq} attempt {attempt} -> {result}")
        progress.set()

    fifo_mode = None
    if a.consumer == "push":
        failed_once = set()

        class Listener(MessageListener):
            def consume(self, message):
                parsed = parse(message)
                if parsed is None:
                    foreign[0] += 1
                    return ConsumeResult.SUCCESS
                name, seq = parsed
                result = "SUCCESS"
                if a.fail_seq is not None and name == group_names[0] and seq == a.fail_seq \
                        and (name, seq) not in failed_once:
                    failed_once.add((name, seq))
                    result = "FAILURE"
                record(name, seq, message.delivery_attempt, result)
                return ConsumeResult.SUCCESS if result == "SUCCESS" else ConsumeResult.FAILURE

        consumer = h.push_consumer(a.group, Listener(), {a.topic: h.filter_expression("*")},
                                   consumption_thread_count=a.threads)
        fifo_mode = consumer.fifo
        log(f"push consumer fifo mode (from server settings): {fifo_mode}")
        if a.settle > 0:
            h.phase(f"letting the consumer get its assignment ({a.settle}s)")
            time.sleep(a.settle)
    else:
        if a.fail_seq is not None:
            raise HarnessError("--fail-seq needs --consumer push")
        consumer = h.simple_consumer(a.group, {a.topic: h.filter_expression("*")}, a.await_duration)

    producer = h.producer([a.topic])
    h.phase(f"sending {a.per_group} messages to each of {a.groups} groups")
    sent = []
    h.partial["sent"] = sent
    for seq in range(a.per_group):
        for g, name in enumerate(group_names):
            m = Message()
            m.topic = a.topic
            m.body = f"{h.run_id}:{g}:{seq}".encode()
            m.tag = "fifo"
            m.message_group = name
            try:
                receipt = producer.send(m)
            except Exception as e:
                raise HarnessError(f"send {name} #{seq} failed: {type(e).__name__}: {e}") from e
            sent.append({"group": name, "seq": seq, **h.receipt_dict(receipt)})

    total = a.groups * a.per_group

    def count():
        with lock:
            return sum(len(set(c)) for c in consumed.values())

    h.phase("consuming")
    deadline = h.deadline_in(a.consume_timeout)
    ack_errors = []
    if a.consumer == "push":
        while count() < total and time.monotonic() < deadline:
            progress.wait(0.2)
            progress.clear()
    else:
        while count() < total and time.monotonic() < deadline:
            for msg in h.receive(consumer, a.batch, a.invisible):
                parsed = parse(msg)
                if parsed is None:
                    foreign[0] += 1
                else:
                    record(parsed[0], parsed[1], msg.delivery_attempt, "SUCCESS")
                try:
                    consumer.ack(msg)
                except Exception as e:
                    ack_errors.append({"message_id": msg.message_id, "error": f"{type(e).__name__}: {e}"})
    if count() >= total and a.linger > 0:
        h.phase(f"lingering {a.linger}s for extra deliveries")
        end = time.monotonic() + a.linger
        while time.monotonic() < min(end, deadline):
            if a.consumer == "push":
                time.sleep(0.2)
            else:
                for msg in h.receive(consumer, a.batch, a.invisible):
                    parsed = parse(msg)
                    if parsed is None:
                        foreign[0] += 1
                    else:
                        record(parsed[0], parsed[1], msg.delivery_attempt, "SUCCESS")
                    consumer.ack(msg)

    with lock:
        violations, missing, duplicates = [], {}, 0
        for name in group_names:
            seqs = consumed[name]
            duplicates += len(seqs) - len(set(seqs))
            lost = sorted(set(range(a.per_group)) - set(seqs))
            if lost:
                missing[name] = lost
            # First successful consumption of each seq must come in increasing order.
            firsts = []
            for s in seqs:
                if s not in firsts:
                    firsts.append(s)
            if firsts != sorted(firsts):
                violations.append(f"{name}: consumed out of order: {seqs}")
            # A retried message blocks its group: nothing later may be delivered before it succeeded.
            succeeded = set()
            for seq, _attempt, result in deliveries[name]:
                if any(s < seq and s not in succeeded for s in range(seq)):
                    violations.append(f"{name}: seq {seq} delivered before all earlier seqs succeeded")
                    break
                if result == "SUCCESS":
                    succeeded.add(seq)
        groups = {name: {"consumed": list(consumed[name]), "deliveries": [list(d) for d in deliveries[name]]}
                  for name in group_names}
    errors = list(violations)
    if missing:
        errors.append(f"missing: {missing}")
    if duplicates and a.fail_on_duplicates:
        errors.append(f"{duplicates} duplicate consumptions")
    if wrong_group_header:
        errors.append(f"{len(wrong_group_header)} messages arrived with a wrong message_group")
    if ack_errors:
        errors.append(f"{len(ack_errors)} acks failed")
    if a.consumer == "push" and a.require_fifo_mode and not fifo_mode:
        errors.append("server settings did not put the push consumer in FIFO mode (subscription.fifo false)")
    result = {
        "ok": not errors, "topic": a.topic, "group": a.group, "consumer": a.consumer, "fifo_mode": fifo_mode,
        "sent": sent, "groups": groups, "violations": violations, "duplicates": duplicates,
        "missing": missing, "foreign": foreign[0], "wrong_message_group": wrong_group_header,
        "ack_errors": ack_errors,
    }
    if errors:
        result["error"] = "; ".join(errors)
    return result


if __name__ == "__main__":
    h = Harness("fifo", __doc__.split("\n\n")[0], default_timeout=120)
    h.add_argument("--topic", default="FifoTopicTest")
    h.add_argument("--group", default="GID_ringmq_py5_fifo")
    h.add_argument("--groups", type=int, default=3, help="number of message groups")
    h.add_argument("--per-group", type=int, default=5, help="messages per message group")
    h.add_argument("--consumer", choices=("push", "simple"), default="push")
    h.add_argument("--fail-seq", type=int, default=None,
                   help="push: fail this seq of the first group once (checks the group blocks)")
    h.add_argument("--threads", type=int, default=4, help="push consumption_thread_count")
    h.add_argument("--settle", type=float, default=2.0, help="push: seconds between consumer start and sending")
    h.add_argument("--batch", type=int, default=8, help="simple: max messages per receive")
    h.add_argument("--invisible", type=int, default=20, help="simple: invisible duration, seconds")
    h.add_argument("--await-duration", type=int, default=5, help="simple: long-polling time, seconds")
    h.add_argument("--consume-timeout", type=float, default=60)
    h.add_argument("--linger", type=float, default=0, help="seconds to watch for extra deliveries at the end")
    h.add_argument("--fail-on-duplicates", action="store_true")
    h.add_argument("--no-require-fifo-mode", dest="require_fifo_mode", action="store_false",
                   help="push: do not fail when the server did not report FIFO mode")
    args = h.parse()
    if args.groups <= 0 or args.per_group <= 0:
        h.parser.error("--groups and --per-group must be > 0")
    h.run(main)
    sys.exit(1)  # not reached
