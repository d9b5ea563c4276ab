"""Shared setup for the C++-client scenarios that tests/cpp_client.rs runs against a real ringmq.

The client is librocketmq.so, the RocketMQ C++ client 2.1, driven through the ctypes binding of
the rocketmq-python-cvs package (scripts/python-env.sh installs it). Every scenario:

- takes --namesrv, --topic, --group, --log-dir and --deadline-s on its command line;
- writes one JSON object per line on stdout ("event" names the line), flushed at once, and ends
  with {"event": "done"}; tests/cpp_client.rs asserts on these lines;
- stops by itself: a watchdog prints {"event": "error"} and exits 2 when the deadline passes,
  and the process leaves with os._exit so no C++ destructor can hang or crash it after the last
  line (the broker sees its connections close).

Probe messages (keys starting with "probe-") are what a scenario sends until its push consumer
is seen pulling every queue; they are never reported as received messages.
"""

import argparse
import ctypes
import json
import os
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer, RecvMessage
from rocketmq.exceptions import ffi_check
from rocketmq.ffi import MSG_CALLBACK_FUNC, dll

CONSUME_SUCCESS = 0
RECONSUME_LATER = 1
PROBE_PREFIX = "probe-"
CASE_PROPERTY = "CASE"
_emit_lock = threading.Lock()


def emit(event, **fields):
    """Writes one result line; lines from the client's callback threads never interleave."""
    line = json.dumps(dict(event=event, **fields), sort_keys=True)
    with _emit_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def fail(why):
    emit("error", why=why)
    os._exit(2)


def parse_args(add_arguments=None):
    """The common arguments plus the scenario's own; starts the deadline watchdog."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("--queues", type=int, required=True)
    parser.add_argument("--deadline-s", type=float, default=40.0)
    # A session credential every client of the scenario signs its requests with.
    parser.add_argument("--access-key")
    parser.add_argument("--secret-key")
    if add_arguments:
        add_arguments(parser)
    args = parser.parse_args()
    watchdog = threading.Timer(args.deadline_s, fail, args=("deadline passed",))
    watchdog.daemon = True
    watchdog.start()
    return args


def finish(*producers):
    """Shuts the producers down and exits 0 after the "done" line. Push consumers are left to
    os._exit: ShutdownPushConsumer of this C++ client build dereferences its never-created
    message-trace producer and segfaults (a client bug, whatever the broker answers)."""
    for producer in producers:
        producer.shutdown()
    emit("done")
    os._exit(0)


def text(value):
    return None if value is None else value.decode("utf-8")


def describe(msg):
    """What a test compares of a received message."""
    return {
        "topic": msg.topic,
        "tags": text(msg.tags),
        "keys": text(msg.keys),
        "body": text(msg.body),
        "case": text(msg.get_property(CASE_PROPERTY)),
        "msg_id": msg.id,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "reconsume_times": msg.reconsume_times,
    }


def message(topic, keys, tags, body, case=None):
    msg = Message(topic)
    msg.set_keys(keys)
    msg.set_tags(tags)
    msg.set_body(body)
    if case is not None:
        msg.set_property(CASE_PROPERTY, case)
    return msg


def sign_with(client, access_key, secret_key):
    """The C++ client's session credential (its channel is Java's default, ALIYUN)."""
    if access_key is not None:
        client.set_session_credentials(access_key, secret_key or "", "ALIYUN")


def start_producer(args, group_suffix="_P", access_key=None, secret_key=None):
    """A started producer, signing with the given key or else the scenario's."""
    producer = Producer(args.group + group_suffix, timeout=5000)
    producer.set_namesrv_addr(args.namesrv)
    producer.set_log_root_path(args.log_dir)
    if access_key is None:
        access_key, secret_key = args.access_key, args.secret_key
    sign_with(producer, access_key, secret_key)
    producer.start()
    return producer


class Inbox:
    """Every delivery the consumer callback saw, in order, with a condition to wait on."""

    def __init__(self):
        self._cond = threading.Condition()
        self.deliveries = []

    def record(self, delivery):
        with self._cond:
            self.deliveries.append(delivery)
            self._cond.notify_all()

    def keys(self):
        with self._cond:
            return {d["keys"] for d in self.deliveries}

    def wait_for(self, predicate, timeout_s):
        """True once predicate(deliveries) holds, False after timeout_s."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not predicate(self.deliveries):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True


def start_push_consumer(args, expression, on_message=None, orderly=False):
    """A push consumer (clustering) of args.topic; on_message(delivery) -> bool decides between
    CONSUME_SUCCESS and RECONSUME_LATER (default: success). Every non-probe delivery is written
    as a "recv" line with "consumed" set to that decision."""
    consumer = PushConsumer(args.group, orderly=orderly)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.set_log_root_path(args.log_dir)
    consumer.set_thread_count(2)
    consumer.set_message_batch_max_size(1)
    sign_with(consumer, args.access_key, args.secret_key)
    inbox = Inbox()

    def callback(_consumer, handle):
        delivery = describe(RecvMessage(handle))
        probe = (delivery["keys"] or "").startswith(PROBE_PREFIX)
        consumed = True
        if on_message is not None and not probe:
            try:
                consumed = bool(on_message(delivery))
            except Exception as exc:  # a failing check must not crash the C++ thread
                emit("callback_error", error=repr(exc))
                consumed = False
        delivery["consumed"] = consumed
        if not probe:
            emit("recv", **delivery)
        inbox.record(delivery)
        return CONSUME_SUCCESS if consumed else RECONSUME_LATER

    # The binding's own subscribe() cannot answer RECONSUME_LATER (an exception raised in its
    # callback is swallowed by ctypes), so the callback is registered here directly.
    func = MSG_CALLBACK_FUNC(callback)
    consumer._callback_refs.append(func)
    ffi_check(dll.Subscribe(consumer._handle, args.topic.encode(), expression.encode()))
    register = dll.RegisterMessageCallbackOrderly if orderly else dll.RegisterMessageCallback
    ffi_check(register(consumer._handle, func))
    consumer.start()
    return consumer, inbox


def wait_until_consuming(args, producer, inbox, tags, rounds=12, round_s=3.0):
    """Sends one probe to every queue (queue = arg % queue count, the binding's selector) until
    the consumer receives a whole round: from then on it pulls every queue at its tail."""
    for round_no in range(rounds):
        keys = ["%s%d-%d" % (PROBE_PREFIX, round_no, q) for q in range(args.queues)]
        for q, key in enumerate(keys):
            producer.send_orderly(message(args.topic, key, tags, "probe"), q)

        def whole_round(deliveries):
            seen = {d["keys"] for d in deliveries}
            return all(k in seen for k in keys)

        if inbox.wait_for(whole_round, round_s):
            emit("consuming", probe_rounds=round_no + 1)
            return
    fail("the push consumer did not receive a whole round of probes")


def send_sync(producer, msg, **fields):
    """Sends and writes a "sent" line with the result and the given fields."""
    result = producer.send_sync(msg)
    emit("sent", status=int(result.status), msg_id=result.msg_id, **fields)
    return result
