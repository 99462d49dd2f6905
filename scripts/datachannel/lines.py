"""The data channel tests' traffic, the same for every peer (callend's data socket, aiortc,
Chromium's page): NAME's small lines "NAME 0", "NAME 1", ... and big lines of 16384 characters
whose content depends on their number, so order and every byte are checked by a SHA-256."""
import hashlib

BIG = 16384


def small(name, i):
    return f"{name} {i}"


def big(i):
    head = f"{i:06d}:"
    return head + "".join(chr(97 + (i * 7 + j) % 26) for j in range(BIG - len(head)))


def big_digest(count):
    h = hashlib.sha256()
    for i in range(count):
        h.update(big(i).encode())
    return h.hexdigest()


class Tally:
    """What arrived: small lines from `peer` in order, big lines hashed."""

    def __init__(self, peer):
        self.peer, self.small, self.out_of_order, self.big = peer, 0, 0, 0
        self.hash = hashlib.sha256()

    def take(self, line):
        if len(line) == BIG:
            self.hash.update(line.encode())
            self.big += 1
        elif line == small(self.peer, self.small):
            self.small += 1
        else:
            self.out_of_order += 1

    def report(self):
        return {"small": self.small, "outOfOrder": self.out_of_order, "big": self.big, "bigSha256": self.hash.hexdigest()}
