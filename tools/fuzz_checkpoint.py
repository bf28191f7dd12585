"""Fuzz target for checkpoint reading (docs/spec/training.txt section 6, the "checkpoint" target).

    python tools/fuzz_checkpoint.py [CORPUS_DIR] [libFuzzer flags, e.g. -max_total_time=300]
    python tools/fuzz_checkpoint.py --smoke N [--seed S]

A long run: nice -n 10 python tools/fuzz_checkpoint.py CORPUS -timeout=1 -rss_limit_mb=1024
-max_total_time=SECONDS (an input over 1 s or 1 GiB is a finding too); every 2^18 inputs it
prints how many it ran raw and repaired and the outcome counts.

The first form needs atheris (pip install atheris); an empty or missing CORPUS_DIR is filled
with the seeds: a valid checkpoint of each model/optimizer pair, the committed hostile files,
and framed manifests that are no checkpoint at all (JSON strings of brackets, structures nested
past the depth limit, counts past the caps, zero-dimension shapes, trees, big manifests of tiny
values); the format's tokens go to libFuzzer as a
dictionary.
The second form needs nothing: it runs N random mutations of the seeds through the same harness
(the test suite uses it).

Every input is tried against four model/optimizer pairs, as it is and again with its header
repaired (magic, version 1 or 2, flags restored; manifest_length bounded by the file;
data_offset, data_length and file_length made consistent; a version-2 checksum recomputed),
so that mutations of the manifest and the data get past the header and checksum checks; each
also goes through the reader without a target (onemodel.load, trees included). Any
exception other than CheckpointError is a crash, and so is a rejected input that changed its
target.
"""
from __future__ import annotations

import io
import os
import random
import re
import struct
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:  # the installed package (or PYTHONPATH's) first: a checkout may hold no built kernels
    import onemodel as om
except ImportError:
    sys.path.insert(0, ROOT)
    import onemodel as om
from onemodel import checkpoint, nn, state_files  # noqa: E402
from onemodel._kernels._crc import crc32c  # noqa: E402
from onemodel.optim import SGD, Adam, AdamW  # noqa: E402

HOSTILE = os.path.join(ROOT, "testdata", "checkpoint", "hostile")
HEADER = struct.Struct("<8sIIQQQQQQ")


def make_pairs() -> list[tuple[str, nn.Module, object]]:
    """The four targets: batch norm + AdamW (the hostile files' own), dropout + Nesterov SGD
    (i32 flags), a bare Linear + AMSGrad Adam, and an MLP loaded without an optimizer."""
    g = om.Generator(1)
    bn = nn.Sequential(nn.Linear(3, 4, generator=g), nn.BatchNorm1d(4))
    drop = nn.Sequential(nn.Linear(2, 3, generator=g), nn.Dropout(0.5, seed=3),
                         nn.Linear(3, 2, generator=g))
    lin = nn.Linear(4, 2, generator=g)
    mlp = nn.Sequential(nn.Linear(3, 3, generator=g), nn.ReLU(), nn.Linear(3, 1, generator=g))
    return [("bn-adamw", bn, AdamW(bn.parameters(), lr=1e-3)),
            ("dropout-sgd-nesterov", drop,
             SGD(drop.parameters(), lr=0.1, momentum=0.9, nesterov=True)),
            ("linear-adam-amsgrad", lin, Adam(lin.parameters(), amsgrad=True)),
            ("mlp-model-only", mlp, None)]


def repaired(data: bytes) -> bytes:
    """The input with a header whose fixed fields are right and whose lengths fit the file."""
    if len(data) < HEADER.size:
        return data
    fields = list(HEADER.unpack_from(data))
    n = len(data)
    m_len = min(fields[4], n - HEADER.size)
    d_off = -(-(HEADER.size + m_len) // 64) * 64
    if d_off > n:
        d_off = n // 64 * 64
        m_len = d_off - HEADER.size
    version = fields[1] if fields[1] in (1, 2) else 2
    checksum = crc32c(data[HEADER.size:]) if version == 2 else 0
    fields = [b"ONEMCKPT", version, 0, HEADER.size, m_len, d_off, n - d_off, n, checksum]
    return HEADER.pack(*fields) + data[HEADER.size:]


def framed(manifest: bytes, version: int = 2) -> bytes:
    """A manifest in a correct header (checksum included) with an empty data region."""
    body = manifest + bytes(-(HEADER.size + len(manifest)) % 64)
    return repaired(HEADER.pack(b"ONEMCKPT", version, 0, HEADER.size, len(manifest), 0, 0, 0, 0)
                    + body)


def _entry(name: str, shape: str) -> str:
    return f'{{"name":"{name}","dtype":"f32","shape":{shape},"offset":0,"length":0}}'


def _manifest(model: str = "[]", extra: str = "[]", optimizer: str = "",
              tree: str = "") -> bytes:
    return (f'{{"format":"onemodel-checkpoint","version":2,"checksum":"crc32c","model":{model}'
            f'{optimizer},"extra":{extra}' + (f',"tree":{tree}' if tree else "") + "}").encode()


def hostile_seeds() -> list[bytes]:
    """Framed manifests that are not checkpoints: strings, depth, counts."""
    hyper = ",".join(['{"name":"lr","bits":0}'] * 2000)
    texts = [
        b'"' + b"[" * 40 + b"{" * 40 + b'"',
        b"[" * 33 + b"]" * 33,
        b'{"a":' * 33 + b"0" + b"}" * 33,
        _manifest(extra="[" * 31 + "]" * 31),
        _manifest(model="[" + _entry("0.weight", "[" + ",".join(["1"] * 100) + "]") + "]"),
        _manifest(model="[" + ",".join([_entry("t", "[]")] * 500) + "]"),
        _manifest(extra="[" + ",".join(f'{{"key":"k{i}","value":{i}}}'
                                       for i in range(1025)) + "]"),
        _manifest(optimizer=f',"optimizer":{{"kind":"AdamW","step":9,"hyper":[{hyper}],'
                            '"state":[]}'),
        _manifest(extra="[" + ",".join(["{}"] * 4000) + "]"),
        _manifest(extra='[{"key":"' + "[" * 50 + '","value":1}]'),
        # zero dimensions: an empty tensor whose other dimensions numpy still refuses
        _manifest(model="[" + _entry("w", f"[0,{1 << 31},{1 << 31}]") + "]"),
        _manifest(model="[" + _entry("w", f"[{1 << 40},0,{1 << 30}]") + "]"),
        _manifest(model="[" + _entry("0", "[0]") + "]", tree='{"l":[{"t":0},{"n":null}]}'),
        # trees (onemodel.save's objects) for the reader without a target, and big manifests
        # of tiny values for its bounds (a quarter MiB each: large next to their files)
        _manifest(model="[" + _entry("0", "[0]") + "]",
                  tree='{"d":[["a",{"t":0}],[3,{"u":[{"f":0},{"s":"x"},{"b":true}]}]]}'),
        _manifest(tree="{" + '"l":[{' * 40 + '"n":null' + "}]" * 40 + "}"),
        _manifest(extra="[" + "[]," * 80000 + "[]]"),
        _manifest(tree='{"l":[' + '{"i":1000},' * 20000 + '{"n":null}]}'),
    ]
    return [framed(t, version) for t in texts for version in (1, 2)]


def _arrays(model, optimizer) -> list:
    """The state arrays a load writes into (in place: the same objects for every input)."""
    arrays = [t._data for _, t in model._named_state()]
    return arrays + (list(optimizer.state_tensors().values()) if optimizer is not None else [])


def _state(arrays: list, optimizer) -> tuple:
    """Everything a load may change: values, hyper-parameters, the step count."""
    values = tuple(a.tobytes() for a in arrays)
    if optimizer is None:
        return values
    return (*values, tuple(optimizer.hyper_parameters().items()), optimizer.step_count)


class Harness:
    """Runs an input against the targets. A header is checked before the target is looked at,
    so a BadHeader from the first target stands for all four; any other rejection is followed
    by a check that the target kept its state, and a successful load is undone from the
    target's own checkpoint (libFuzzer wants the same targets for every input)."""

    def __init__(self) -> None:
        self.pairs = make_pairs()
        self.initial = [checkpoint.to_bytes(model, optimizer) for _, model, optimizer in self.pairs]
        self.arrays = [_arrays(model, optimizer) for _, model, optimizer in self.pairs]
        self.states = [_state(a, opt) for a, (_, _, opt) in zip(self.arrays, self.pairs)]
        self.outcomes: dict[str, int] = {}
        self.raw = self.repaired = 0
        self.report_every = 0  # the atheris run prints its counts this often

    def _try(self, variant: bytes) -> None:
        try:  # the target-free reader (onemodel.load) refuses with CheckpointError alone too
            state_files.load(io.BytesIO(variant))
        except checkpoint.CheckpointError:
            pass
        for i, (name, model, optimizer) in enumerate(self.pairs):
            try:
                checkpoint.from_bytes(variant, model, optimizer)
                outcome = "loaded"
                checkpoint.from_bytes(self.initial[i], model, optimizer)
            except checkpoint.BadHeader:
                self.outcomes["BadHeader"] = self.outcomes.get("BadHeader", 0) + 1
                return
            except checkpoint.CheckpointError as e:
                outcome = e.kind
                if _state(self.arrays[i], optimizer) != self.states[i]:
                    raise AssertionError(f"{name}: a rejected input ({e!r}) changed the "
                                         "target")
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def __call__(self, data: bytes) -> None:
        self.raw += 1
        if self.report_every and self.raw % self.report_every == 0:
            print(f"raw inputs {self.raw}, repaired {self.repaired}, outcomes {self.outcomes}",
                  file=sys.stderr)
        self._try(data)
        fixed = repaired(data)
        if fixed != data:
            self.repaired += 1
            self._try(fixed)


def seeds() -> list[bytes]:
    out = []
    for i, (_, model, optimizer) in enumerate(make_pairs()):
        out.append(checkpoint.to_bytes(model, optimizer, {"samples": 64 * i, "epoch": i}))
        if optimizer is not None:
            out.append(checkpoint.to_bytes(model))
    if os.path.isdir(HOSTILE):
        for name in sorted(os.listdir(HOSTILE)):
            with open(os.path.join(HOSTILE, name), "rb") as f:
                data = f.read()
            if len(data) <= 1 << 16:  # the megabyte-sized ones teach a mutator nothing
                out.append(data)
    return out + hostile_seeds()


# -- plain-Python mutations (smoke mode) -------------------------------------------------------
_NUMBER = re.compile(rb"-?\d+")
_STRING = re.compile(rb'"[^"]*"')
_NUMBERS = [b"0", b"-1", b"1", b"63", b"64", b"-64", b"4294967296", b"9223372036854775807",
            b"9223372036854775808", b"18446744073709551615", b"18446744073709551616",
            b"4611686018427387904", b"1.5", b"1e3", b"true", b"null", b"NaN", b"[]", b"{}",
            b'"f32"', b'"i64"', b'"u8"', b"99999999999999999999999999999", b"2147483648",
            b"[0,2147483648,2147483648]"]
_STRINGS = [b'""', b'"f32"', b'"i32"', b'"i64"', b'"u8"', b'"SGD"', b'"Adam"', b'"AdamW"',
            b'"0.weight"', b'"\\ud800"', b'"lr"', b'"shape"', b'"offset"', b"0", b"[]",
            b'"crc32c"', b'"xxh64"', b'"onemodel-checkpoint"']
# The format's field names and frame, for the libFuzzer dictionary.
_TOKENS = [b'"format"', b'"version"', b'"checksum"', b'"model"', b'"optimizer"', b'"kind"',
           b'"step"', b'"hyper"', b'"name"', b'"bits"', b'"state"', b'"extra"', b'"key"',
           b'"value"', b'"dtype"', b'"length"', b'"tree"', b'{"t":', b'{"d":', b'{"l":',
           b'{"u":', b'{"n":null}', b'{"b":', b'{"i":', b'{"f":', b'{"s":', b'":', b'",',
           b"ONEMCKPT", b"\x01\x00\x00\x00", b"\x02\x00\x00\x00", b"@\x00\x00\x00\x00\x00\x00\x00"]


def mutate(data: bytes, pool: list[bytes], rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(9)
        if not b:
            b += rng.choice(pool)[:rng.randint(0, 200)]
        elif op == 0:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[rng.randrange(len(b))] = rng.choice(b'\x00\xff\x7f\x80"[]{},:0-9\\e')
        elif op == 2:
            i = rng.randrange(len(b))
            del b[i:i + rng.randint(1, 16)]
        elif op == 3:
            i, j = sorted(rng.randrange(len(b) + 1) for _ in range(2))
            b[i:i] = b[i:j][:64]
        elif op == 4:
            del b[rng.randrange(len(b) + 1):]
        elif op == 5:
            other = rng.choice(pool)
            i, j = rng.randrange(len(b) + 1), rng.randrange(len(other) + 1)
            b = b[:i] + other[j:j + rng.randint(1, 256)]
        elif op in (6, 7):
            pattern, values = (_NUMBER, _NUMBERS) if op == 6 else (_STRING, _STRINGS)
            found = list(pattern.finditer(b, 64, 64 + 4096))
            if found:
                m = rng.choice(found)
                b[m.start():m.end()] = rng.choice(values)
        else:
            i = rng.choice((16, 24, 32, 40, 48, 56))  # a u64 header field
            b[i:i + 8] = struct.pack("<Q", rng.choice([0, 1, 63, 64, len(b), max(len(b) - 64, 0),
                                                       1 << 63, (1 << 64) - 1]))
    return bytes(b)


def smoke(n: int, seed: int = 0) -> dict[str, int]:
    """Runs n random mutations of the seeds through the harness; returns outcome counts."""
    rng = random.Random(seed)
    harness = Harness()
    pool = seeds()
    for data in pool:
        harness(data)
    for _ in range(n):
        harness(mutate(rng.choice(pool), pool, rng))
    return harness.outcomes


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--smoke"]:
        n = int(args[1])
        seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 0
        print(smoke(n, seed))
        return
    import atheris

    corpus = [a for a in args if not a.startswith("-")]
    if not corpus:
        corpus = [tempfile.mkdtemp(prefix="ckpt-corpus-")]
        sys.argv.append(corpus[0])
    os.makedirs(corpus[0], exist_ok=True)
    if not os.listdir(corpus[0]):
        for i, data in enumerate(seeds()):
            with open(os.path.join(corpus[0], f"seed-{i:03d}"), "wb") as f:
                f.write(data)
    if not any(a.startswith("-dict=") for a in args):
        # The manifest's tokens, so byte mutations can swap one field or number for another;
        # written beside the artifacts when a folder is named for them (a test's temporary
        # folder, removed with it), else in a folder of its own.
        prefixes = [a.split("=", 1)[1] for a in args if a.startswith("-artifact_prefix=")]
        folder = (prefixes[0] if prefixes and prefixes[0].endswith("/")
                  else tempfile.mkdtemp(prefix="ckpt-dict-"))
        path = os.path.join(folder, "checkpoint.dict")
        with open(path, "w") as f:
            for token in sorted(set(_NUMBERS + _STRINGS + _TOKENS)):
                f.write('"' + "".join(f"\\x{c:02x}" for c in token) + '"\n')
        sys.argv.append(f"-dict={path}")
    # Coverage comes from the reader alone: import it again, instrumented.
    # (the checkpoint package with all its modules, the reader's _checks and _reader among them;
    # om.load's tree reader, state_files, with it: it must raise the instrumented package's errors)
    global checkpoint, state_files
    for name in [m for m in sys.modules
                 if m == "onemodel.checkpoint" or m.startswith("onemodel.checkpoint.")]:
        sys.modules.pop(name)
    sys.modules.pop("onemodel.state_files")
    with atheris.instrument_imports(include=["onemodel.checkpoint", "onemodel.state_files"]):
        import onemodel.checkpoint as instrumented
        import onemodel.state_files as instrumented_files
    checkpoint, state_files = instrumented, instrumented_files
    harness = Harness()
    # libFuzzer may leave without running exit handlers: the counts go out along the way.
    harness.report_every = 1 << 18
    atheris.Setup(sys.argv, lambda data: harness(bytes(data)))
    atheris.Fuzz()


if __name__ == "__main__":
    main()
