"""A callend room on loopback for the viewers' benches (bench.py, beside-call.py): processes with
their logs in one directory, the test clip, tokens, and `callend serve --http`."""
import os
import re
import subprocess
import sys
import time


class LocalRoom:
    def __init__(self, binary, work, room, name):
        self.binary, self.work, self.room, self.name = binary, work, room, name
        self.procs = []
        self.secret = os.path.join(work, "secret")

    def start(self, name, command):
        """A process whose output goes to WORK/NAME.log."""
        log = open(os.path.join(self.work, name + ".log"), "w")
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def log(self, name):
        return open(os.path.join(self.work, name + ".log")).read()

    def wait_line(self, name, pattern, proc, timeout=60):
        """The first match of pattern in the process's log, once it is printed (polled)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, self.log(name))
            if match:
                return match
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        sys.exit(f"{self.name}: {name} did not print {pattern!r}: {self.log(name)[-2000:]}")

    def clip(self):
        """4 s of testsrc2 at 640x360@30, for the senders to loop."""
        path = os.path.join(self.work, "clip.y4m")
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30", "-t", "4",
                        "-pix_fmt", "yuv420p", path], check=True)
        return path

    def token(self, who, can="join"):
        if not os.path.exists(self.secret):
            subprocess.run([self.binary, "token", "--new-secret", "--out", self.secret], check=True, capture_output=True)
        return subprocess.run([self.binary, "token", "--room", self.room, "--identity", who, "--can", can, "--secret-file", self.secret],
                              check=True, capture_output=True, text=True).stdout.strip()

    def token_file(self, who):
        path = os.path.join(self.work, who + ".token")
        open(path, "w").write(self.token(who))
        return path

    def serve(self):
        """Starts `callend serve --http` on loopback; returns its signaling port and web address."""
        self.token("nobody")  # the secret, before the service reads it
        serve = self.start("serve", [self.binary, "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--secret-file", self.secret])
        self.wait_line("serve", r"web page at", serve)
        log = self.log("serve")
        return re.search(r"listening on 127\.0\.0\.1:(\d+)", log).group(1), re.search(r"web page at (http://[^ ]*?)/? ", log).group(1)

    def stop(self):
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
