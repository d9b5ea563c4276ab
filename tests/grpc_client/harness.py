"""Shared plumbing for the RocketMQ 5 gRPC client scenarios in this directory.

The scenarios drive ringmq's gRPC endpoint with the official Python SDK (`rocketmq-python-client`
5.1.2, installed by scripts/python5-env.sh into its own venv). Each scenario script:

* takes its connection settings from argv or the environment (argv wins):
    --endpoint HOST:PORT        RINGMQ_GRPC_ENDPOINT   (default 127.0.0.1:8081)
    --access-key AK             RINGMQ_GRPC_ACCESS_KEY (default: none, i.e. anonymous)
    --secret-key SK             RINGMQ_GRPC_SECRET_KEY
    --tls                       RINGMQ_GRPC_TLS=1      (default plaintext h2c, as the SDK)
    --ca PATH                   RINGMQ_GRPC_CA         (PEM bundle trusted for TLS; implies --tls)
    --tls-server-name NAME      RINGMQ_GRPC_TLS_SERVER_NAME (name checked against the
                                server certificate instead of the dialled host)
  plus scenario options, which can also be given as one JSON object with --json '{"count": 5}'
  (keys are the option names with '_' for '-'; explicit argv options override it);
* writes exactly ONE JSON object on stdout when it ends, whatever happens: {"ok": true|false,
  "scenario": ..., ...}; on failure it has "error" (and "timeout": true when the run went over
  --timeout) and "partial" with what had been observed so far. Everything else (progress lines,
  the SDK's own log) goes to stderr;
* exits 0 when ok, 1 on a failed check or an error, 2 on bad arguments, 3 on timeout. The total
  run time is bounded by --timeout seconds (a watchdog prints the JSON and exits).

The SDK normally logs to ~/logs/rocketmq_python/rocketmq_client.log (a RotatingFileHandler set up
when `rocketmq` is first imported). The harness installs its own logger under the SDK's name
before that import, so nothing is written under ~/logs: --sdk-log stderr|off|PATH
(RINGMQ_SDK_LOG, default stderr) and --sdk-log-level (RINGMQ_SDK_LOG_LEVEL, default WARNING).

Import this module before anything from `rocketmq`, and import `rocketmq` only after
Harness.parse() (the scenario scripts do it inside main()).
"""

import argparse
import functools
import importlib.metadata
import json
import logging
import os
import sys
import threading
import time
import traceback
import types
import uuid

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_TIMEOUT = 3

SDK_LOGGER_NAME = "rocketmq-python-client"


def log(*parts):
    """A progress line on stderr."""
    print(f"[{time.strftime('%H:%M:%S')}]", *parts, file=sys.stderr, flush=True)


class HarnessError(Exception):
    """A scenario step failed in a way worth a one-line explanation."""


class _RecentProblems(logging.Handler):
    """Keeps the last SDK warnings/errors (condensed to one line each) for a failure result."""

    def __init__(self, keep=12):
        super().__init__()
        self.keep = keep
        self.lines = []

    def emit(self, record):
        try:
            text = record.getMessage()
        except Exception:
            text = str(record.msg)
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        # gRPC errors print as "<AioRpcError ...:\n status = ...\n details = ..."; keep the useful part.
        short = " | ".join(ln for ln in lines if not ln.startswith("debug_error_string"))
        self.lines.append(f"{record.levelname}: {short[:400]}")
        del self.lines[:-self.keep]


_SDK_PROBLEMS = _RecentProblems()


class _Parser(argparse.ArgumentParser):
    """argparse that keeps stdout for the JSON result: help goes to stderr, errors become JSON."""

    def __init__(self, *args, harness=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._harness = harness

    def print_help(self, file=None):
        super().print_help(file or sys.stderr)

    def error(self, message):
        self.print_usage(sys.stderr)
        self._harness._emit({"ok": False, "error": f"bad arguments: {message}"}, EXIT_USAGE)


def _env_flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class Harness:
    def __init__(self, scenario, description, default_timeout=120):
        self.scenario = scenario
        self.run_id = uuid.uuid4().hex[:10]
        self.partial = {}  # what the scenario has seen so far; reported on failure/timeout
        self.phase_name = "arguments"
        self.args = None
        self.sdk_version = None
        self._emit_lock = threading.Lock()
        self._emitted = False
        self._clients = []  # (label, client) to shut down at the end, newest last
        self._started = time.monotonic()
        self._deadline = None
        p = _Parser(description=description, harness=self,
                    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        self.parser = p
        c = p.add_argument_group("connection")
        c.add_argument("--endpoint", default=os.environ.get("RINGMQ_GRPC_ENDPOINT", "127.0.0.1:8081"),
                       help="gRPC endpoint host:port (several: 'h1:p1;h2:p2')")
        c.add_argument("--access-key", default=os.environ.get("RINGMQ_GRPC_ACCESS_KEY", ""))
        c.add_argument("--secret-key", default=os.environ.get("RINGMQ_GRPC_SECRET_KEY", ""))
        c.add_argument("--namespace", default=os.environ.get("RINGMQ_GRPC_NAMESPACE", ""))
        c.add_argument("--tls", action="store_true", default=_env_flag("RINGMQ_GRPC_TLS"),
                       help="connect with TLS")
        c.add_argument("--ca", default=os.environ.get("RINGMQ_GRPC_CA") or None,
                       help="PEM file of CA certificates to trust (implies --tls); "
                            "without it grpc's bundled public roots are used")
        c.add_argument("--tls-server-name", default=os.environ.get("RINGMQ_GRPC_TLS_SERVER_NAME") or None,
                       help="host name to verify the server certificate against")
        c.add_argument("--request-timeout", type=int, default=3,
                       help="SDK request timeout in whole seconds (ClientConfiguration.request_timeout)")
        r = p.add_argument_group("run")
        r.add_argument("--timeout", type=float, default=float(default_timeout),
                       help="bound on the whole run, seconds")
        r.add_argument("--sdk-log", default=os.environ.get("RINGMQ_SDK_LOG", "stderr"),
                       help="where the SDK logs: stderr, off, or a file path")
        r.add_argument("--sdk-log-level", default=os.environ.get("RINGMQ_SDK_LOG_LEVEL", "WARNING"))
        r.add_argument("--json", default=None, metavar="OBJECT",
                       help="scenario options as one JSON object (keys: option names, '-' or '_')")

    # ---------------------------------------------------------------- arguments

    def add_argument(self, *args, **kwargs):
        return self.parser.add_argument(*args, **kwargs)

    def parse(self, argv=None):
        """Parses argv (+ --json), starts the watchdog and sets up SDK logging. Returns the args."""
        argv = sys.argv[1:] if argv is None else list(argv)
        pre = argparse.ArgumentParser(add_help=False)
        pre.add_argument("--json", default=None)
        known, _ = pre.parse_known_args(argv)
        if known.json:
            try:
                obj = json.loads(known.json)
            except ValueError as e:
                self.parser.error(f"--json is not valid JSON: {e}")
            if not isinstance(obj, dict):
                self.parser.error("--json must be a JSON object")
            dests = {a.dest for a in self.parser._actions}
            defaults = {}
            for key, value in obj.items():
                dest = key.replace("-", "_")
                if dest not in dests or dest in ("help", "json"):
                    self.parser.error(f"--json: unknown option {key!r}")
                defaults[dest] = value
            self.parser.set_defaults(**defaults)
        args = self.parser.parse_args(argv)
        if args.ca:
            args.tls = True
            if not os.path.isfile(args.ca):
                self.parser.error(f"--ca {args.ca}: no such file")
        if args.timeout <= 0:
            self.parser.error("--timeout must be positive")
        if args.request_timeout <= 0:
            self.parser.error("--request-timeout must be a positive whole number of seconds")
        if not isinstance(getattr(logging, str(args.sdk_log_level).upper(), None), int):
            self.parser.error(f"--sdk-log-level {args.sdk_log_level!r} is not a logging level")
        self.args = args
        try:
            self.sdk_version = importlib.metadata.version("rocketmq-python-client")
        except importlib.metadata.PackageNotFoundError:
            self._emit({"ok": False, "error": "rocketmq-python-client is not installed in this python "
                        f"({sys.executable}); run the scenarios with the python that "
                        "scripts/python5-env.sh prints"}, EXIT_FAILED)
        self._deadline = self._started + args.timeout
        self._start_watchdog(args.timeout)
        self._setup_sdk_logging(args.sdk_log, args.sdk_log_level)
        self._setup_tls(args)
        self.phase("starting")
        return args

    # ---------------------------------------------------------------- time

    def phase(self, name):
        """Names the current step; the timeout error and failures report it."""
        self.phase_name = name
        log(f"{self.scenario}: {name}")

    def elapsed(self):
        return time.monotonic() - self._started

    def remaining(self):
        return self._deadline - time.monotonic()

    def deadline_in(self, seconds):
        """A monotonic deadline `seconds` from now, never past the run's own deadline (less a
        margin kept for shutdown and printing the result)."""
        return min(time.monotonic() + seconds, self._deadline - self._shutdown_margin())

    def _shutdown_margin(self):
        return min(self.args.request_timeout + 2.0, self.args.timeout / 4)

    def _start_watchdog(self, seconds):
        def fire():
            self._emit({
                "ok": False,
                "timeout": True,
                "error": f"timeout: {self.scenario} did not finish within {seconds:g}s "
                         f"(stuck in phase: {self.phase_name})",
            }, EXIT_TIMEOUT)

        t = threading.Timer(seconds, fire)
        t.daemon = True
        t.start()

    # ---------------------------------------------------------------- SDK setup

    @staticmethod
    def _setup_sdk_logging(target, level):
        # rocketmq/v5/log/log_config.py creates ~/logs/rocketmq_python/ and a rotating file handler
        # at import time. Pre-registering a module under its name makes `from .log_config import
        # logger` pick up this logger instead, so the SDK never touches ~/logs.
        if "rocketmq.v5.log.log_config" in sys.modules:
            raise RuntimeError("harness must configure SDK logging before rocketmq is imported")
        logger = logging.getLogger(SDK_LOGGER_NAME)
        logger.propagate = False
        for h in list(logger.handlers):
            logger.removeHandler(h)
        wanted = getattr(logging, str(level).upper(), None)
        if not isinstance(wanted, int):
            raise HarnessError(f"--sdk-log-level {level!r} is not a logging level")
        if target != "off":
            handler = logging.StreamHandler(sys.stderr) if target == "stderr" else logging.FileHandler(target)
            handler.setFormatter(logging.Formatter("%(asctime)s sdk [%(levelname)s] %(threadName)s: %(message)s"))
            handler.setLevel(wanted)
            logger.addHandler(handler)
        # The SDK reports most gRPC failures only in its log; keep the last few for the result.
        _SDK_PROBLEMS.setLevel(logging.WARNING)
        logger.addHandler(_SDK_PROBLEMS)
        logger.setLevel(min(wanted, logging.WARNING))
        module = types.ModuleType("rocketmq.v5.log.log_config")
        module.logger = logger
        sys.modules["rocketmq.v5.log.log_config"] = module

    @staticmethod
    def _setup_tls(args):
        # The SDK builds TLS channels as aio.secure_channel(target, grpc.ssl_channel_credentials(),
        # options) with fixed options (rocketmq/v5/client/connection/rpc_channel.py): no way to pass
        # a CA or a server name through its API. Both module attributes are looked up at call time,
        # so wrapping them here reaches every channel the SDK opens.
        if not args.tls:
            return
        import grpc
        import grpc.aio
        if args.ca:
            with open(args.ca, "rb") as f:
                roots = f.read()
            original_credentials = grpc.ssl_channel_credentials

            @functools.wraps(original_credentials)
            def ssl_channel_credentials(root_certificates=None, private_key=None, certificate_chain=None):
                return original_credentials(root_certificates or roots, private_key, certificate_chain)

            grpc.ssl_channel_credentials = ssl_channel_credentials
        if args.tls_server_name:
            original_secure_channel = grpc.aio.secure_channel
            name = args.tls_server_name

            @functools.wraps(original_secure_channel)
            def secure_channel(target, credentials, options=None, *rest, **kwargs):
                options = list(options or []) + [("grpc.ssl_target_name_override", name)]
                return original_secure_channel(target, credentials, options, *rest, **kwargs)

            grpc.aio.secure_channel = secure_channel

    def config(self):
        from rocketmq import ClientConfiguration, Credentials
        a = self.args
        cfg = ClientConfiguration(a.endpoint, Credentials(a.access_key, a.secret_key), a.namespace,
                                  a.request_timeout)
        if cfg.rpc_endpoints.facade == "":
            # __parse_endpoints logs and returns None on a malformed string; the client would
            # then fail later with an obscure error.
            raise HarnessError(f"endpoint {a.endpoint!r} is not host:port")
        return cfg

    def _started_client(self, label, client, topics):
        self.phase(f"starting {label}")
        t0 = time.monotonic()
        try:
            client.startup()
        except Exception as e:
            why = f"{type(e).__name__}: {e}"
            ctx = e.__context__
            if ctx is not None and ctx is not e.__cause__:
                # PushConsumer's failure cleanup (5.1.2) calls shutdown() on a consumption service
                # that only exists once Settings arrived, so an AttributeError hides the reason.
                why = f"{type(ctx).__name__}: {ctx} (then, in the SDK's failure cleanup: {why})"
            raise HarnessError(f"{label} startup failed after {time.monotonic() - t0:.1f}s: {why}") from e
        self._clients.append((label, client))
        # Startup only logs a failed QueryRoute (client.py __init_routes); ask again so an
        # unreachable or refusing server is reported here rather than at the first send/receive.
        for topic in topics:
            try:
                client._retrieve_topic_route_data(topic)
            except Exception as e:
                raise HarnessError(f"{label} started but QueryRoute for topic {topic!r} failed "
                                   f"(the gRPC error is in sdk_log / stderr): {e}") from e
        log(f"{label} started in {time.monotonic() - t0:.2f}s ({client.client_id})")
        return client

    def producer(self, topics, checker=None, label="producer"):
        from rocketmq import Producer
        p = Producer(self.config(), tuple(topics), checker=checker, tls_enable=self.args.tls)
        return self._started_client(label, p, topics)

    def simple_consumer(self, group, subscription, await_duration, label="simple consumer"):
        from rocketmq import SimpleConsumer
        c = SimpleConsumer(self.config(), group, subscription, await_duration=await_duration,
                           tls_enable=self.args.tls)
        return self._started_client(label, c, list(subscription))

    def push_consumer(self, group, listener, subscription, label="push consumer", **kwargs):
        from rocketmq import PushConsumer
        c = PushConsumer(self.config(), group, listener, subscription, tls_enable=self.args.tls, **kwargs)
        return self._started_client(label, c, list(subscription))

    @staticmethod
    def filter_expression(expression, filter_type="TAG"):
        from rocketmq import FilterExpression
        from rocketmq.grpc_protocol import FilterType
        kind = str(filter_type).upper()
        if kind in ("SQL", "SQL92"):
            return FilterExpression(expression, FilterType.SQL)
        if kind == "TAG":
            return FilterExpression(expression or "*", FilterType.TAG)
        raise HarnessError(f"unknown filter type {filter_type!r} (TAG or SQL)")

    def receive(self, consumer, max_num, invisible_duration):
        """One SimpleConsumer.receive; gRPC/SDK errors become HarnessError with context."""
        try:
            return consumer.receive(max_num, invisible_duration) or []
        except Exception as e:
            raise HarnessError(f"receive({max_num}, {invisible_duration}) failed: {type(e).__name__}: {e}") from e

    # ---------------------------------------------------------------- result

    @staticmethod
    def message_dict(msg, **extra):
        body = msg.body or b""
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        d = {
            "message_id": msg.message_id,
            "topic": msg.topic,
            "body": text if text is not None else body.hex(),
            "body_is_hex": text is None,
            "tag": msg.tag,
            "keys": sorted(msg.keys),
            "properties": dict(msg.properties),
            "message_group": msg.message_group,
            "delivery_attempt": msg.delivery_attempt,
            "message_type": msg.message_type,
            "born_timestamp_ms": msg.born_timestamp,
            "delivery_timestamp_ms": msg.delivery_timestamp,
            "corrupted": msg.corrupted,
        }
        d.update(extra)
        return d

    @staticmethod
    def receipt_dict(receipt):
        return {
            "message_id": receipt.message_id,
            "transaction_id": receipt.transaction_id or None,
            "queue": str(receipt.message_queue),
            "offset": receipt.offset,
            "recall_handle": receipt.recall_handle,
        }

    def _emit(self, result, code):
        with self._emit_lock:
            if self._emitted:
                return
            self._emitted = True
            out = {"ok": bool(result.get("ok")), "scenario": self.scenario, "run_id": self.run_id,
                   "sdk_version": self.sdk_version}
            out.update(result)
            out["elapsed_s"] = round(self.elapsed(), 3)
            if not out["ok"]:
                out.setdefault("phase", self.phase_name)
                if self.partial:
                    out.setdefault("partial", self.partial)
                if _SDK_PROBLEMS.lines:
                    out.setdefault("sdk_log", list(_SDK_PROBLEMS.lines))
                log(f"{self.scenario}: FAILED: {out.get('error')}")
            text = None
            for _ in range(5):
                try:
                    text = json.dumps(out, default=str, sort_keys=True)
                    break
                except RuntimeError:  # "changed size during iteration": SDK threads still writing
                    time.sleep(0.05)
                except Exception as e:  # never leave stdout empty
                    text = json.dumps({"ok": False, "scenario": self.scenario,
                                       "error": f"result not serialisable: {e}"})
                    code = EXIT_FAILED
                    break
            if text is None:
                out.pop("partial", None)
                text = json.dumps(out, default=str, sort_keys=True)
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
            sys.stderr.flush()
            # The SDK leaves non-daemon executor threads and an asyncio loop behind; do not wait
            # for them.
            os._exit(code)

    def _shutdown_clients(self):
        errors = []
        for label, client in reversed(self._clients):
            done = threading.Event()
            failure = []

            def stop(c=client):
                try:
                    c.shutdown()
                except Exception as e:
                    failure.append(f"{type(e).__name__}: {e}")
                finally:
                    done.set()

            threading.Thread(target=stop, daemon=True, name=f"shutdown {label}").start()
            if not done.wait(max(1.0, min(self.args.request_timeout * 2 + 1.0, self.remaining() - 0.5))):
                errors.append(f"{label}: shutdown did not finish in time")
            elif failure:
                errors.append(f"{label}: {failure[0]}")
        self._clients = []
        return errors

    def run(self, main):
        """Calls main(harness, args) -> result dict (with "ok"), shuts the clients down, prints the
        JSON and exits. Exceptions become {"ok": false, "error": ...}."""
        if self.args is None:
            self.parse()
        try:
            result = main(self, self.args)
            if not isinstance(result, dict) or "ok" not in result:
                raise HarnessError("[harness bug] scenario returned no result dict with 'ok'")
        except HarnessError as e:
            result = {"ok": False, "error": str(e)}
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            result = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        failed_phase = self.phase_name
        self.phase("shutting down clients")
        errors = self._shutdown_clients()
        if errors:
            result["shutdown_errors"] = errors
        if not result.get("ok"):
            result.setdefault("phase", failed_phase)
        self._emit(result, EXIT_OK if result.get("ok") else EXIT_FAILED)
