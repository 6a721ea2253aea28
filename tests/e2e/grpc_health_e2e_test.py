"""Health and reflection of the real coordinator and worker daemon, asked by a generic client.

The client is not ringleader's code: Debian's grpcio (python3-grpcio) with the message types of
grpc.health.v1 and grpc.reflection.v1alpha compiled from the official .proto files (Debian's
grpc-proto) by protoc (protobuf-compiler) into a descriptor set, and built at run time with
google.protobuf's message_factory (python3-protobuf). That is what grpcurl or grpc_health_probe
do; neither they nor grpc_cli are packaged by Debian 12, nor are the grpcio-health-checking and
grpcio-reflection Python packages.

usage: grpc_health_e2e_test.py COORDINATOR_BINARY WORKER_BINARY RANK_BINARY
(run with /usr/bin/python3; the wrapper grpc_health_e2e_test.sh checks the packages first).
"""

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import grpc
from google.protobuf import descriptor_pb2, message_factory

GRPC_PROTO_ROOT = "/usr/share/grpc-proto"
HEALTH_PROTO = "grpc/health/v1/health.proto"
REFLECTION_PROTO = "grpc/reflection/v1alpha/reflection.proto"
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
HEALTH_WATCH = "/grpc.health.v1.Health/Watch"
REFLECTION_INFO = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
RPC_TIMEOUT_S = 5
START_TIMEOUT_S = 30

COORDINATOR, WORKER, RANK = (None, None, None)


def load_messages(tmp):
    """The health and reflection message classes, from the .proto files via protoc."""
    descriptor_set = os.path.join(tmp, "health_reflection.pb")
    subprocess.run(
        ["/usr/bin/protoc", f"-I{GRPC_PROTO_ROOT}", "--include_imports",
         f"--descriptor_set_out={descriptor_set}", HEALTH_PROTO, REFLECTION_PROTO],
        check=True, timeout=60)
    with open(descriptor_set, "rb") as f:
        files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    return message_factory.GetMessages(list(files.file))


def wait_for(condition, timeout_s, what):
    """Polls condition() until it returns a true value (returned) or timeout_s passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.05)


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


class Process:
    """A child process with its output in a log file; stopped (SIGTERM, then SIGKILL) by stop()."""

    def __init__(self, argv, log):
        self.log = log
        with open(log, "wb") as out:
            self.popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL)

    def running(self):
        return self.popen.poll() is None

    def stop(self):
        if self.running():
            self.popen.terminate()
            try:
                self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)


class HealthAndReflectionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="health-", dir=os.environ.get("TEST_TMPDIR"))
        m = load_messages(cls.tmp)
        cls.HealthCheckRequest = m["grpc.health.v1.HealthCheckRequest"]
        cls.HealthCheckResponse = m["grpc.health.v1.HealthCheckResponse"]
        cls.ReflectionRequest = m["grpc.reflection.v1alpha.ServerReflectionRequest"]
        cls.ReflectionResponse = m["grpc.reflection.v1alpha.ServerReflectionResponse"]
        cls.Status = cls.HealthCheckResponse.ServingStatus
        cls.processes = []
        cls.channels = []
        # A port that refuses connections for the whole test: bound, never listening. The
        # second worker daemon points at it, so it can never register.
        cls.dead_port = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        cls.dead_port.bind(("127.0.0.1", 0))
        try:
            cls.start_cluster()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start_cluster(cls):
        port_file = os.path.join(cls.tmp, "coordinator.port")
        # Plaintext: the generic client speaks to the services, not to TLS (tls_e2e tests that).
        cls.coordinator = cls.start([COORDINATOR, "--listen=127.0.0.1:0", "--http_listen=",
                                     "--insecure",
                                     f"--port_file={port_file}"], "coordinator.log")
        cls.coordinator_address = wait_for(
            lambda: cls.alive(cls.coordinator) and read(port_file).strip(), START_TIMEOUT_S,
            "the coordinator writes its port file")
        cls.worker = cls.start_worker("health-w0", cls.coordinator_address)
        cls.worker_admin = cls.admin_address(cls.worker)
        dead = "127.0.0.1:%d" % cls.dead_port.getsockname()[1]
        cls.lonely_worker = cls.start_worker("health-lonely", dead)
        cls.lonely_admin = cls.admin_address(cls.lonely_worker)

    @classmethod
    def start(cls, argv, log):
        process = Process(argv, os.path.join(cls.tmp, log))
        cls.processes.append(process)
        return process

    @classmethod
    def start_worker(cls, name, coordinator):
        return cls.start([WORKER, f"--coordinator={coordinator}", f"--name={name}", "--insecure",
                          f"--work_dir={os.path.join(cls.tmp, name)}", f"--rank_binary={RANK}",
                          "--admin_listen=127.0.0.1:0"], f"{name}.log")

    @classmethod
    def alive(cls, process):
        if not process.running():
            raise AssertionError(f"{process.log} ended (exit {process.popen.returncode}):\n"
                                 f"{read(process.log)}")
        return True

    @classmethod
    def admin_address(cls, worker):
        # The daemon logs the admin port it bound ("admin port (health) on HOST:PORT").
        def find():
            cls.alive(worker)
            match = re.search(r"admin port \(health\) on (\S+)", read(worker.log))
            return match and match.group(1)
        return wait_for(find, START_TIMEOUT_S, f"{worker.log} names its admin port")

    @classmethod
    def tearDownClass(cls):
        for channel in cls.channels:
            channel.close()
        for process in reversed(cls.processes):
            process.stop()
        cls.dead_port.close()

    def tearDown(self):
        # Every process's log, when a test failed.
        outcome = getattr(self, "_outcome", None)
        errors = getattr(getattr(outcome, "result", None), "errors", []) + \
            getattr(getattr(outcome, "result", None), "failures", [])
        if any(test is self for test, _ in errors):
            for process in self.processes:
                print(f"---- {process.log}\n{read(process.log)[-3000:]}", file=sys.stderr)

    # --- the generic client -------------------------------------------------------------------

    def channel(self, address):
        channel = grpc.insecure_channel(address)
        self.channels.append(channel)
        return channel

    def check(self, address, service):
        """grpc.health.v1.Health/Check: the serving status, or the RpcError raised."""
        call = self.channel(address).unary_unary(
            HEALTH_CHECK, request_serializer=self.HealthCheckRequest.SerializeToString,
            response_deserializer=self.HealthCheckResponse.FromString)
        try:
            return call(self.HealthCheckRequest(service=service), timeout=RPC_TIMEOUT_S).status
        except grpc.RpcError as error:
            return error

    def watch_first(self, address, service):
        """The first status grpc.health.v1.Health/Watch streams for `service`."""
        call = self.channel(address).unary_stream(
            HEALTH_WATCH, request_serializer=self.HealthCheckRequest.SerializeToString,
            response_deserializer=self.HealthCheckResponse.FromString)
        stream = call(self.HealthCheckRequest(service=service), timeout=RPC_TIMEOUT_S)
        try:
            return next(stream).status
        finally:
            stream.cancel()

    def reflect(self, address, **request):
        """One grpc.reflection.v1alpha ServerReflectionInfo exchange."""
        call = self.channel(address).stream_stream(
            REFLECTION_INFO, request_serializer=self.ReflectionRequest.SerializeToString,
            response_deserializer=self.ReflectionResponse.FromString)
        responses = list(call(iter([self.ReflectionRequest(**request)]), timeout=RPC_TIMEOUT_S))
        self.assertEqual(len(responses), 1, responses)
        response = responses[0]
        self.assertFalse(response.HasField("error_response"), response.error_response)
        return response

    def listed_services(self, address):
        response = self.reflect(address, list_services="")
        return {service.name for service in response.list_services_response.service}

    def status_name(self, status):
        if isinstance(status, grpc.RpcError):
            return f"RPC error {status.code().name}: {status.details()}"
        return self.Status.Name(status)

    def assert_serving(self, address, service):
        status = self.check(address, service)
        self.assertEqual(status, self.Status.Value("SERVING"),
                         f"Check('{service}') on {address}: {self.status_name(status)}")

    def assert_unknown(self, address, service):
        status = self.check(address, service)
        self.assertIsInstance(status, grpc.RpcError,
                              f"Check('{service}') on {address}: {self.status_name(status)}")
        self.assertEqual(status.code(), grpc.StatusCode.NOT_FOUND, self.status_name(status))
        self.assertEqual(self.watch_first(address, service), self.Status.Value("SERVICE_UNKNOWN"))

    # --- the coordinator ----------------------------------------------------------------------

    def test_coordinator_health(self):
        for service in ["", "ringleader.v1.JobService", "ringleader.v1.WorkerService"]:
            self.assert_serving(self.coordinator_address, service)
        self.assertEqual(self.watch_first(self.coordinator_address, "ringleader.v1.JobService"),
                         self.Status.Value("SERVING"))
        self.assert_unknown(self.coordinator_address, "ringleader.v1.NoSuchService")

    def test_coordinator_reflection(self):
        services = self.listed_services(self.coordinator_address)
        for expected in ["ringleader.v1.JobService", "ringleader.v1.WorkerService",
                         "grpc.health.v1.Health"]:
            self.assertIn(expected, services)
        # Describing a service (what `grpcurl describe` does): the file that defines JobService,
        # with its methods.
        response = self.reflect(self.coordinator_address,
                                file_containing_symbol="ringleader.v1.JobService")
        files = [descriptor_pb2.FileDescriptorProto.FromString(raw)
                 for raw in response.file_descriptor_response.file_descriptor_proto]
        methods = {method.name
                   for f in files if f.package == "ringleader.v1"
                   for service in f.service if service.name == "JobService"
                   for method in service.method}
        self.assertTrue({"SubmitJob", "GetJob", "ListWorkers"} <= methods, methods)

    # --- the worker daemon's admin port -------------------------------------------------------

    def test_worker_admin_health(self):
        # SERVING once the daemon holds a registration with the coordinator.
        wait_for(lambda: self.check(self.worker_admin, "") == self.Status.Value("SERVING"),
                 START_TIMEOUT_S, f"the worker's admin port {self.worker_admin} says SERVING: "
                 f"{self.status_name(self.check(self.worker_admin, ''))}")
        self.assert_serving(self.worker_admin, "ringleader.v1.WorkerDaemon")
        self.assert_unknown(self.worker_admin, "ringleader.v1.NoSuchService")

    def test_unregistered_worker_is_not_serving(self):
        # Its coordinator address refuses every connection: it never registers.
        for service in ["", "ringleader.v1.WorkerDaemon"]:
            status = self.check(self.lonely_admin, service)
            self.assertEqual(status, self.Status.Value("NOT_SERVING"), self.status_name(status))

    def test_worker_admin_reflection(self):
        services = self.listed_services(self.worker_admin)
        self.assertIn("grpc.health.v1.Health", services)
        # The admin port is not the coordinator: it does not offer ringleader's APIs.
        self.assertNotIn("ringleader.v1.JobService", services)


if __name__ == "__main__":
    COORDINATOR, WORKER, RANK = (os.path.abspath(p) for p in sys.argv[1:4])
    unittest.main(argv=sys.argv[:1] + sys.argv[4:], verbosity=2)
