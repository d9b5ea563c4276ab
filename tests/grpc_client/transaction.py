"""Transactional producer with a TransactionChecker: three half messages, one committed by the
producer (EndTransaction COMMIT, SOURCE_CLIENT), one rolled back, one left UNKNOWN so that the
broker's transaction check (RecoverOrphanedTransactionCommand on the producer's Telemetry stream)
calls the checker, which answers --checker-result (COMMIT by default; EndTransaction
SOURCE_SERVER_CHECK). A SimpleConsumer checks that exactly the committed messages arrive.

The producer must stay up (and its Telemetry stream open) until the check comes: --check-timeout
bounds the wait; the broker's check interval must be shorter.

    python transaction.py --endpoint 127.0.0.1:8081 --topic TxT --group TxG

JSON result (stdout):
  {"ok", "scenario": "transaction", "run_id", "elapsed_s", "topic", "group", "checker_result",
   "sent": {"commit"|"rollback"|"unknown": {"message_id", "transaction_id", "queue", "offset", ...}},
   "end_transaction": {"commit": null|error, "rollback": null|error},
   "checker_calls": [{"role", "message_id", "after_send_s", "answer"}],
   "received": [<message> + "role"], "missing": [role], "unexpected": [role], "foreign": n}
"""

import sys
import threading
import time

from harness import Harness, HarnessError, log


def main(h, a):
    from rocketmq import Message, TransactionChecker, TransactionResolution

    checker_answer = TransactionResolution.COMMIT if a.checker_result == "commit" else TransactionResolution.ROLLBACK
    roles = ("commit", "rollback", "unknown")
    sent, sent_at = {}, {}
    checker_calls = []
    checked = threading.Event()
    h.partial.update(sent=sent, checker_calls=checker_calls)

    class Checker(TransactionChecker):
        def check(self, message):
            role = message.properties.get("txn-role")
            body = (message.body or b"").decode("utf-8", "replace")
            if not body.startswith(h.run_id + ":"):
                answer = TransactionResolution.ROLLBACK if a.rollback_foreign else TransactionResolution.COMMIT
                checker_calls.append({"role": None, "foreign": True, "message_id": message.message_id,
                                      "answer": TransactionResolution.Name(answer)})
                return answer
            # The broker should only ask about the message left unknown; answer the others
            # consistently with what the producer already did.
            answer = {"commit": TransactionResolution.COMMIT, "rollback": TransactionResolution.ROLLBACK}.get(
                role, checker_answer)
            checker_calls.append({
                "role": role, "message_id": message.message_id,
                "after_send_s": round(time.monotonic() - sent_at[role], 3) if role in sent_at else None,
                "answer": TransactionResolution.Name(answer)})
            log(f"checker called for the {role} message -> {TransactionResolution.Name(answer)}")
            if role == "unknown":
                checked.set()
            return answer

    consumer = h.simple_consumer(a.group, {a.topic: h.filter_expression("*")}, a.await_duration)
    producer = h.producer([a.topic], checker=Checker())

    h.phase("sending half messages")
    end_transaction = {}
    for role in roles:
        tx = producer.begin_transaction()
        m = Message()
        m.topic = a.topic
        m.body = f"{h.run_id}:{role}".encode()
        m.tag = "txn"
        m.keys = f"{h.run_id}-{role}"
        m.add_property("txn-role", role)
        try:
            receipt = producer.send(m, tx)
        except Exception as e:
            raise HarnessError(f"send of the {role} half message failed: {type(e).__name__}: {e}") from e
        sent_at[role] = time.monotonic()
        sent[role] = h.receipt_dict(receipt)
        if not receipt.transaction_id:
            raise HarnessError(f"SendMessage answered no transaction_id for the {role} half message")
        if role in ("commit", "rollback"):
            try:
                tx.commit() if role == "commit" else tx.rollback()
                end_transaction[role] = None
            except Exception as e:
                end_transaction[role] = f"{type(e).__name__}: {e}"
    log(f"sent {sent}")

    expect = {"commit"} | ({"unknown"} if a.checker_result == "commit" else set())
    h.phase(f"consuming; waiting for the broker to check the unknown transaction (up to {a.check_timeout}s)")
    received, arrived, foreign = [], set(), 0
    h.partial.update(received=received)
    deadline = h.deadline_in(a.check_timeout)
    done_at = None
    while time.monotonic() < deadline:
        if done_at is None and expect <= arrived and checked.is_set():
            done_at = time.monotonic()
            log(f"expected messages arrived; lingering {a.linger}s")
        if done_at is not None and time.monotonic() >= done_at + a.linger:
            break
        for msg in h.receive(consumer, a.batch, a.invisible):
            body = (msg.body or b"").decode("utf-8", "replace")
            if body.startswith(h.run_id + ":"):
                role = body.split(":", 1)[1]
                received.append(h.message_dict(msg, role=role))
                arrived.add(role)
            else:
                foreign += 1
            consumer.ack(msg)

    missing = sorted(expect - arrived)
    unexpected = sorted(arrived - expect)
    errors = []
    for role, err in end_transaction.items():
        if err:
            errors.append(f"EndTransaction {role} failed: {err}")
    if not checked.is_set():
        errors.append(f"the checker was not called for the unknown transaction within {a.check_timeout}s")
    if missing:
        errors.append(f"missing: {missing}")
    if unexpected:
        errors.append(f"arrived though not committed: {unexpected}")
    asked_resolved = [c for c in checker_calls if c.get("role") in ("commit", "rollback")]
    if asked_resolved and a.strict_checks:
        errors.append(f"the broker asked about already resolved transactions: {asked_resolved}")
    if any(r["message_type"] not in (None, 4) for r in received) and a.strict_checks:
        errors.append("a committed message arrived with message_type other than TRANSACTION")
    result = {
        "ok": not errors, "topic": a.topic, "group": a.group, "checker_result": a.checker_result,
        "sent": sent, "end_transaction": end_transaction, "checker_calls": checker_calls,
        "received": received, "missing": missing, "unexpected": unexpected, "foreign": foreign,
    }
    if errors:
        result["error"] = "; ".join(errors)
    return result


if __name__ == "__main__":
    h = Harness("transaction", __doc__.split("\n\n")[0], default_timeout=150)
    h.add_argument("--topic", default="TxTopicTest")
    h.add_argument("--group", default="GID_ringmq_py5_tx")
    h.add_argument("--checker-result", choices=("commit", "rollback"), default="commit",
                   help="what the checker answers for the unknown transaction")
    h.add_argument("--check-timeout", type=float, default=90,
                   help="how long to wait for the check and the committed messages, seconds")
    h.add_argument("--linger", type=float, default=2.0,
                   help="seconds to keep receiving after everything expected arrived")
    h.add_argument("--batch", type=int, default=16)
    h.add_argument("--invisible", type=int, default=30)
    h.add_argument("--await-duration", type=int, default=5, help="SimpleConsumer long-polling time, seconds")
    h.add_argument("--rollback-foreign", action="store_true",
                   help="answer ROLLBACK (default COMMIT) for checks about other runs' messages")
    h.add_argument("--no-strict-checks", dest="strict_checks", action="store_false",
                   help="tolerate checks about resolved transactions and odd message types")
    args = h.parse()
    h.run(main)
    sys.exit(1)  # not reached
