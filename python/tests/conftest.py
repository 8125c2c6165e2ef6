"""A real grammard for the package's tests, started on 127.0.0.1 with the
tokenizers tools/setup.sh installs.

Where things are: $GRAMMARD_DAEMON (the daemon binary), $GRAMMARD_TOKENIZERS
(a folder of tokenizer folders), $GRAMMARD_CLIENT_LIBRARY (read by the
package itself). Under `bazel test` python/BUILD sets them from runfiles;
run by hand, they default to bazel-bin/ and .deps/ of the source tree.
Tests needing the daemon or a tokenizer skip with a message saying which
is missing.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)

os.environ.setdefault("GRAMMARD_CLIENT_LIBRARY",
                      os.path.join(ROOT, "bazel-bin", "client",
                                   "libgrammard_client.so"))


def daemon_binary():
    return os.environ.get("GRAMMARD_DAEMON") or os.path.join(
        ROOT, "bazel-bin", "service", "grammard")


def tokenizer_root():
    return os.environ.get("GRAMMARD_TOKENIZERS") or os.path.join(
        ROOT, ".deps", "tokenizers")


def tokenizer_json(name):
    path = os.path.join(tokenizer_root(), name, "tokenizer.json")
    if not os.path.exists(path):
        pytest.skip(f"SKIPPED: tokenizer {name} is not installed at {path} "
                    f"(tools/setup.sh installs it)")
    return path


class Daemon:
    """One grammard process; restart() brings it back on the same port."""

    def __init__(self, tokenizers, flags=()):
        binary = daemon_binary()
        if not os.access(binary, os.X_OK):
            pytest.skip(f"SKIPPED: no grammard binary at {binary} "
                        f"(bazel build //service:grammard)")
        for name in tokenizers:
            tokenizer_json(name)
        self.dir = tempfile.mkdtemp(prefix="grammard_py_")
        links = os.path.join(self.dir, "tokenizers")
        os.mkdir(links)
        for name in tokenizers:
            os.symlink(os.path.join(tokenizer_root(), name),
                       os.path.join(links, name))
        self.args = [binary, "--metrics_listen=", "--tokenizer_dir=" + links,
                     "--port_file=" + os.path.join(self.dir, "ports"),
                     *flags]
        self.port = 0
        self.proc = None
        self.start()

    @property
    def target(self):
        return f"127.0.0.1:{self.port}"

    def start(self):
        ports = os.path.join(self.dir, "ports")
        if os.path.exists(ports):
            os.unlink(ports)
        log = open(os.path.join(self.dir, "grammard.log"), "ab")
        self.proc = subprocess.Popen(
            [*self.args, f"--listen=127.0.0.1:{self.port}"], stdout=log,
            stderr=log)
        give_up = time.monotonic() + 60
        while time.monotonic() < give_up:
            if self.proc.poll() is not None:
                raise RuntimeError("grammard exited at start:\n" + self.log())
            try:
                with open(ports) as f:
                    text = f.read()
                self.port = int(text.split()[0].split("=")[1])
                return
            except (OSError, IndexError, ValueError):
                time.sleep(0.02)
        raise RuntimeError("grammard did not serve within 60 s:\n" +
                           self.log())

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def restart(self):
        self.kill()
        self.start()

    def log(self):
        try:
            with open(os.path.join(self.dir, "grammard.log")) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="session")
def daemon():
    d = Daemon(["llama3"])
    yield d
    d.stop()


@pytest.fixture
def fresh_daemon():
    """A daemon of the test's own (killed and restarted by it)."""
    d = Daemon(["llama3"])
    yield d
    d.stop()


@pytest.fixture(scope="session")
def llama3():
    from detokenizer import ByteLevelDetokenizer
    return ByteLevelDetokenizer(tokenizer_json("llama3"))


@pytest.fixture(scope="session")
def reference(daemon, llama3):
    """The vLLM adapter's outputs, filled row by row: what every other way
    of driving either adapter must reproduce."""
    from runs import run_vllm
    outputs, _, _ = run_vllm(daemon, llama3)
    return outputs
