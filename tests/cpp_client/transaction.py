"""Scenario (e): the C++ client's transaction producer through its C API, which the Python
binding does not wrap (CreateTransactionProducer, SendMessageTransaction, declared here with
ctypes). Four messages, each deciding by its key: "commit-0" commits and "rollback-0" rolls
back in the local transaction; "check-commit-0" and "check-rollback-0" answer UNKNOWN there, so
the broker asks the producer back (CHECK_TRANSACTION_STATE) and the check callback commits or
rolls back. A push consumer started before them must receive both committed messages and never
a rolled-back one: the scenario lingers --linger-s after the commits arrived. Writes "sent_tx",
"execute", "check" and "recv" lines."""

import ctypes
from ctypes import POINTER, c_char_p, c_int, c_void_p

import harness
from rocketmq.ffi import _CSendResult, dll

# CTransactionStatus: E_COMMIT_TRANSACTION, E_ROLLBACK_TRANSACTION, E_UNKNOWN_TRANSACTION.
COMMIT, ROLLBACK, UNKNOWN = 0, 1, 2
KEYS = ["commit-0", "rollback-0", "check-commit-0", "check-rollback-0"]
COMMITTED = [k for k in KEYS if "commit-" in k]
LOCAL_TRANSACTION = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p)
dll.CreateTransactionProducer.argtypes = [c_char_p, LOCAL_TRANSACTION, c_void_p]
dll.CreateTransactionProducer.restype = c_void_p
dll.SendMessageTransaction.argtypes = [
    c_void_p, c_void_p, LOCAL_TRANSACTION, c_void_p, POINTER(_CSendResult)]
dll.SendMessageTransaction.restype = c_int


def add_arguments(parser):
    parser.add_argument("--linger-s", type=float, default=6.0)


def keys_of(msg_handle):
    return (dll.GetMessageKeys(msg_handle) or b"").decode()


def execute_local(_producer, msg, _data):
    keys = keys_of(msg)
    if keys.startswith("check-"):
        outcome = UNKNOWN
    else:
        outcome = COMMIT if keys.startswith("commit-") else ROLLBACK
    harness.emit("execute", keys=keys, outcome=outcome)
    return outcome


def check_local(_producer, msg_ext, _data):
    keys = keys_of(msg_ext)
    outcome = COMMIT if "commit-" in keys else ROLLBACK
    harness.emit("check", keys=keys, outcome=outcome)
    return outcome


class TransactionProducer:
    def __init__(self, args):
        self.executor = LOCAL_TRANSACTION(execute_local)
        self.checker = LOCAL_TRANSACTION(check_local)
        self.handle = dll.CreateTransactionProducer(
            (args.group + "_TX").encode(), self.checker, None)
        if not self.handle:
            harness.fail("CreateTransactionProducer returned NULL")
        harness.ffi_check(dll.SetProducerNameServerAddress(self.handle, args.namesrv.encode()))
        harness.ffi_check(dll.SetProducerLogPath(self.handle, args.log_dir.encode()))
        harness.ffi_check(dll.StartProducer(self.handle))

    def send(self, msg):
        result = _CSendResult()
        status = dll.SendMessageTransaction(
            self.handle, msg._handle, self.executor, None, ctypes.pointer(result))
        return status, result

    def shutdown(self):
        harness.ffi_check(dll.ShutdownProducer(self.handle))


def main():
    args = harness.parse_args(add_arguments)
    producer = harness.start_producer(args)
    consumer, inbox = harness.start_push_consumer(args, "*")
    harness.wait_until_consuming(args, producer, inbox, "TagA")
    tx_producer = TransactionProducer(args)
    for key in KEYS:
        body = "body of %s" % key
        status, result = tx_producer.send(harness.message(args.topic, key, "TagA", body, key))
        harness.emit("sent_tx", keys=key, body=body, api_status=status,
                     status=result.sendStatus, msg_id=result.msgId.decode())
        if status != 0:
            harness.fail("SendMessageTransaction failed: %s" % dll.GetLatestErrorMessage())
    if not inbox.wait_for(lambda d: set(COMMITTED) <= {x["keys"] for x in d}, 25.0):
        harness.fail("a committed message was not received")
    inbox.wait_for(lambda d: False, args.linger_s)
    harness.finish(tx_producer, producer)


main()
