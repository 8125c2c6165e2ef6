"""Token ids to bytes for byte-level BPE tokenizers (llama3's), read from
tokenizer.json: enough to check what a constrained generation wrote.

Each vocabulary string maps its characters back to bytes through GPT-2's
byte-to-character table; added (special) tokens decode to their content.
"""

import json


def _byte_chars():
    """GPT-2's table: printable bytes stand for themselves, the rest take
    the code points from 256 up, in byte order."""
    printable = (list(range(ord("!"), ord("~") + 1)) +
                 list(range(ord("¡"), ord("¬") + 1)) +
                 list(range(ord("®"), ord("ÿ") + 1)))
    table = {}
    extra = 0
    for b in range(256):
        if b in printable:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return table


class ByteLevelDetokenizer:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
        chars = _byte_chars()
        size = max(spec["model"]["vocab"].values()) + 1
        for t in spec.get("added_tokens", []):
            size = max(size, t["id"] + 1)
        self.bytes = [b""] * size
        for text, i in spec["model"]["vocab"].items():
            self.bytes[i] = bytes(chars[c] for c in text)
        self.special = set()
        for t in spec.get("added_tokens", []):
            self.bytes[t["id"]] = t["content"].encode("utf-8")
            if t.get("special"):
                self.special.add(t["id"])
        self.ids = {b: i for i, b in enumerate(self.bytes)
                    if i not in self.special}

    def decode(self, ids, skip_special=True):
        return b"".join(self.bytes[i] for i in ids
                        if not (skip_special and i in self.special))

    def token(self, text):
        """The id of a token whose bytes are exactly `text`."""
        return self.ids[text.encode("utf-8")]
