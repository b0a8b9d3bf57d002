"""A kazoo client that contends for one ZooKeeper path, driven by lines on stdin.

Run by spawn-interop-worker.ts with /usr/bin/python3 (Debian's python3-kazoo).

Arguments: <connect string> <path> <id> <recipe: lock | election> <session timeout ms>
           [extra lock patterns, comma-separated: Lock's extra_lock_patterns; for Election,
           its lock is replaced by a Lock with them]

Lines in:  acquire <timeout ms> | release | stop
Lines out: ready | queued <node name> | acquired <node name> <czxid> | timeout | released
           | stopped | error <message>

stdin closing (the test process died) ends the process: the session closes with it.
"""

import os
import queue
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout
from kazoo.recipe.election import Election
from kazoo.recipe.lock import Lock

_out = threading.Lock()


def say(line):
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def one_line(error):
    return ("%s: %s" % (type(error).__name__, error)).replace("\n", " ")


class Worker:
    def __init__(self, client, path, ident, recipe, patterns):
        self.client = client
        self.path = path
        self.ident = ident
        self.recipe = recipe
        self.patterns = patterns
        self.lock = None
        self.election = None
        self.leading = None
        self.resign = None
        self.ended = None
        self.held = None

    def new_lock(self):
        return Lock(self.client, self.path, self.ident, extra_lock_patterns=self.patterns)

    def watch_queued(self, lock):
        """Says `queued <node>` once, as soon as kazoo has created its node (before it waits)."""
        attempt = {"said": False, "done": False}
        guard = threading.Lock()

        def say_once():
            with guard:
                if attempt["said"] or lock.node is None:
                    return attempt["said"]
                attempt["said"] = True
                say("queued " + lock.node)
                return True

        def poll():
            while not attempt["done"] and not say_once():
                time.sleep(0.005)

        def settle(acquired):
            if acquired:
                say_once()
            attempt["done"] = True

        threading.Thread(target=poll, daemon=True).start()
        return settle

    def announce(self, node):
        self.held = self.path + "/" + node
        stat = self.client.exists(self.held)
        say("acquired %s %d" % (node, stat.czxid if stat is not None else 0))

    def acquire(self, timeout_ms):
        if self.recipe == "lock":
            if self.lock is None:
                self.lock = self.new_lock()
            lock = self.lock
            settle = self.watch_queued(lock)
            try:
                lock.acquire(timeout=timeout_ms / 1000.0)
            except LockTimeout:
                settle(False)
                say("timeout")
                return
            settle(True)
            self.announce(lock.node)
        elif self.recipe == "election":
            self.election = Election(self.client, self.path, self.ident)
            if self.patterns:
                # Election takes no patterns: give it a Lock that has them.
                self.election.lock = self.new_lock()
            lock = self.election.lock
            self.leading = threading.Event()
            self.resign = threading.Event()
            self.ended = threading.Event()
            settle = self.watch_queued(lock)
            threading.Thread(target=self.campaign, daemon=True).start()
            if not self.leading.wait(timeout_ms / 1000.0):
                settle(False)
                self.election.cancel()
                self.ended.wait(30)
                self.election = None
                say("timeout")
                return
            settle(True)
            self.announce(lock.node)
        else:
            raise ValueError("unknown recipe " + self.recipe)

    def campaign(self):
        try:
            self.election.run(self.lead)
        except Exception as error:  # noqa: BLE001 - reported to the test
            say("error " + one_line(error))
        finally:
            self.ended.set()

    def lead(self):
        self.leading.set()
        self.resign.wait()

    def release(self):
        if self.recipe == "lock":
            self.lock.release()
        else:
            self.resign.set()
            self.ended.wait(30)
            self.election = None
        # Report only once the node is gone, so "released" means the next contender may go.
        if self.held is not None:
            deadline = time.monotonic() + 30
            while self.client.exists(self.held) is not None:
                if time.monotonic() > deadline:
                    raise RuntimeError(self.held + " was not deleted")
                time.sleep(0.005)
            self.held = None
        say("released")


def main():
    if len(sys.argv) < 6:
        say("error usage: kazoo_worker.py <connect> <path> <id> <lock|election> <session timeout ms> [patterns]")
        sys.exit(2)
    connect, path, ident, recipe, session_ms = sys.argv[1:6]
    patterns = [p for p in (sys.argv[6] if len(sys.argv) > 6 else "").split(",") if p]
    client = KazooClient(hosts=connect, timeout=int(session_ms) / 1000.0)
    worker = Worker(client, path, ident, recipe, patterns)
    steps = queue.Queue()

    def run_steps():
        # Acquires block, so they run off the reader thread (stdin closing must still end us),
        # one after another in the order the commands came, after the connection.
        try:
            client.start(timeout=30)
        except Exception as error:  # noqa: BLE001 - reported to the test
            say("error no connection to %s within 30 s: %s" % (connect, one_line(error)))
            os._exit(1)
        say("ready")
        while True:
            step = steps.get()
            try:
                step()
            except Exception as error:  # noqa: BLE001 - reported to the test
                say("error " + one_line(error))

    threading.Thread(target=run_steps, daemon=True).start()
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "acquire":
            timeout_ms = int(words[1]) if len(words) > 1 else 60000
            steps.put(lambda t=timeout_ms: worker.acquire(t))
        elif words[0] == "release":
            steps.put(worker.release)
        elif words[0] == "stop":
            client.stop()
            client.close()
            say("stopped")
            os._exit(0)
        else:
            say("error unknown command " + words[0])
    # stdin closed: the test process is gone.
    os._exit(0)


if __name__ == "__main__":
    main()
