"""Hostile checkpoints (docs/spec/training.txt section 6, docs/spec/clarifications.md): every file
here is assembled by hand from the format's rules (a header packed with struct, the manifest written
as JSON text, the data region laid out at 64-byte offsets), then broken in one named way. Each must
raise its own error type, from memory and from the file, and leave the model and optimizer
unchanged.

The committed copies live in testdata/checkpoint/hostile/<kind>-<name>.ckpt; the test checks
they equal what the builder produces, and ONEMODEL_WRITE_TESTDATA=1 rewrites them. Most are
version 1 (which still loads, so all of its rules hold); the version-2 ones carry a CRC-32C
computed here by a table, independently of the reader's.
"""
from __future__ import annotations

import json
import math
import os
import struct

import numpy as np
import pytest

import onemodel as om
from onemodel import checkpoint, nn
from onemodel.optim import AdamW

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                      "testdata",
                      "checkpoint", "hostile")
WRITE = os.environ.get("ONEMODEL_WRITE_TESTDATA") == "1"
KINDS = {"BadHeader": checkpoint.BadHeader, "BadManifest": checkpoint.BadManifest,
         "Mismatch": checkpoint.Mismatch, "BadTensor": checkpoint.BadTensor}

# The target: Linear(3, 4) then BatchNorm1d(4), trained by AdamW, in the state order.
MODEL = [("0.weight", "f32", [4, 3]), ("0.bias", "f32", [4]), ("1.weight", "f32", [4]),
         ("1.bias", "f32", [4]), ("1.running_mean", "f32", [4]), ("1.running_var", "f32", [4]),
         ("1.num_batches_tracked", "i64", [])]
OPT_STATE = [(f"{moment}.{i}", "f32", shape) for i, shape in enumerate([[4, 3], [4], [4], [4]])
             for moment in ("exp_avg", "exp_avg_sq")]
HYPER = [("lr", 0.002), ("beta1", 0.9), ("beta2", 0.999), ("eps", 1e-8),
         ("weight_decay", 0.01), ("amsgrad", 0.0)]
ELEMENT = {"f32": "<f4", "i32": "<i4", "i64": "<i8"}


def _crc_table() -> list[int]:
    table = []
    for n in range(256):
        for _ in range(8):
            n = (n >> 1) ^ (0x82F63B78 if n & 1 else 0)  # Castagnoli, reflected
        table.append(n)
    return table


CRC_TABLE = _crc_table()


def crc32c_reference(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = (crc >> 8) ^ CRC_TABLE[(crc ^ b) & 0xFF]
    return crc ^ 0xFFFFFFFF


def make_target() -> tuple[nn.Module, AdamW]:
    g = om.Generator(7)
    model = nn.Sequential(nn.Linear(3, 4, generator=g), nn.BatchNorm1d(4))
    opt = AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    # A state unlike the files' own, so a partial load would show.
    opt.lr, opt.step_count = 0.0025, 5
    for arr in opt.state_tensors().values():
        arr[...] = 0.5
    return model, opt


# -- the builder --------------------------------------------------------------------------
def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def round_up(n: int) -> int:
    return -(-n // 64) * 64


def layout(tensors: list) -> tuple[list[dict], bytes]:
    """Entries at 64-aligned offsets and the data region holding made-up values."""
    entries, data = [], bytearray()
    for i, (name, dtype, shape) in enumerate(tensors):
        values = (np.arange(math.prod(shape)) - i) * 0.125 if dtype == "f32" else \
            np.arange(math.prod(shape)) + 3 + i
        raw = np.asarray(values).astype(ELEMENT[dtype]).tobytes()
        data += bytes(round_up(len(data)) - len(data))
        entries.append({"name": name, "dtype": dtype, "shape": list(shape),
                        "offset": len(data), "length": len(raw)})
        data += raw
    return entries, bytes(data)


def manifest(model=MODEL, state=OPT_STATE, kind="AdamW", step=9, hyper=HYPER,
             extra=(("samples", 640),), optimizer=True, version=1) -> tuple[dict, bytes]:
    """The manifest object in the spec's field order, and its data region."""
    entries, data = layout(list(model) + (list(state) if optimizer else []))
    m = {"format": "onemodel-checkpoint", "version": version}
    if version == 2:
        m["checksum"] = "crc32c"
    m["model"] = entries[:len(model)]
    if optimizer:
        m["optimizer"] = {"kind": kind, "step": step,
                          "hyper": [{"name": n, "bits": f32_bits(v)} for n, v in hyper],
                          "state": entries[len(model):]}
    m["extra"] = [{"key": k, "value": v} for k, v in extra]
    return m, data


def text(m: dict) -> bytes:
    return json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def assemble(manifest_text: bytes, data: bytes, padding: bytes = b"", **header) -> bytes:
    """Header + manifest + zero padding (or `padding`) + data; `header` overrides fields (they
    may lie). A version-2 header gets the CRC-32C of what follows it unless "reserved" is
    given."""
    data_offset = round_up(64 + len(manifest_text))
    fields = {"magic": b"ONEMCKPT", "version": 1, "flags": 0, "manifest_offset": 64,
              "manifest_length": len(manifest_text), "data_offset": data_offset,
              "data_length": len(data), "file_length": data_offset + len(data), "reserved": 0}
    fields.update(header)
    pad = padding or bytes(data_offset - 64 - len(manifest_text))
    body = manifest_text + pad + data
    if fields["version"] == 2 and "reserved" not in header:
        fields["reserved"] = crc32c_reference(body)
    return struct.pack("<8sIIQQQQQQ", *fields.values()) + body


VALID_MANIFEST, DATA = manifest()
VALID_TEXT = text(VALID_MANIFEST)
VALID = assemble(VALID_TEXT, DATA)
VALID2_TEXT = text(manifest(version=2)[0])
VALID2 = assemble(VALID2_TEXT, DATA, version=2)


def edited(old: str, new: str) -> bytes:
    """The valid file with the first `old` in its manifest text replaced by `new`."""
    t = VALID_TEXT.decode()
    assert old in t, old
    return assemble(t.replace(old, new, 1).encode(), DATA)


def with_manifest(change) -> bytes:
    m = json.loads(VALID_TEXT)
    change(m)
    return assemble(text(m), DATA)


def with_entry(index: int, **fields) -> bytes:
    """The valid file with fields of model entry `index` (negative: from the optimizer's)."""
    def change(m):
        entries = m["model"] if index >= 0 else m["optimizer"]["state"]
        entries[index].update(fields)
    return with_manifest(change)


def hyper_with(name: str, value: float) -> list:
    return [(n, value if n == name else v) for n, v in HYPER]


def built(m_and_data: tuple[dict, bytes], **header) -> bytes:
    return assemble(text(m_and_data[0]), m_and_data[1], **header)


def flipped(data: bytes, pos: int, bit: int = 0) -> bytes:
    out = bytearray(data)
    out[pos] ^= 1 << bit
    return bytes(out)


def nonzero_padding_between_tensors() -> bytes:
    """A byte of the padding after 0.weight (48 bytes, then 16 of padding) set to 1."""
    data = bytearray(DATA)
    data[50] = 1
    return assemble(VALID_TEXT, bytes(data))


def hyper_entries(n: int) -> bytes:
    """Valid JSON with n hyper-parameter entries in place of AdamW's six."""
    return with_manifest(lambda m: m["optimizer"].update(hyper=[{"name": "lr", "bits": 0}] * n))


def cases() -> list[tuple[str, str, bytes, bool]]:
    """(kind, name, bytes, load with the optimizer)."""
    n = len(VALID)
    m_end = 64 + len(VALID_TEXT)
    before_end = m_end // 64 * 64 if m_end % 64 else m_end - 64
    last = VALID_MANIFEST["optimizer"]["state"][-1]
    out = [
        # header
        ("BadHeader", "empty", b""),
        ("BadHeader", "short", VALID[:40]),
        ("BadHeader", "header-only", VALID[:64]),
        ("BadHeader", "magic", assemble(VALID_TEXT, DATA, magic=b"ONEMODEL")),
        ("BadHeader", "version", assemble(VALID_TEXT, DATA, version=3)),
        ("BadHeader", "version-zero", assemble(VALID_TEXT, DATA, version=0)),
        ("BadHeader", "flags", assemble(VALID_TEXT, DATA, flags=1)),
        ("BadHeader", "reserved", assemble(VALID_TEXT, DATA, reserved=1 << 63)),
        ("BadHeader", "file-length-long", assemble(VALID_TEXT, DATA, file_length=n + 64)),
        ("BadHeader", "file-length-short", assemble(VALID_TEXT, DATA, file_length=n - 1)),
        ("BadHeader", "truncated", VALID[:-1]),
        ("BadHeader", "manifest-offset", assemble(VALID_TEXT, DATA, manifest_offset=128)),
        ("BadHeader", "manifest-outside", assemble(VALID_TEXT, DATA, manifest_length=n)),
        ("BadHeader", "manifest-length-max",
         assemble(VALID_TEXT, DATA, manifest_length=(1 << 64) - 1)),
        ("BadHeader", "data-offset-unaligned",
         assemble(VALID_TEXT, DATA, data_offset=round_up(m_end) + 32)),
        ("BadHeader", "data-offset-before-manifest-end",
         assemble(VALID_TEXT, DATA, data_offset=before_end)),
        ("BadHeader", "data-offset-past-eof",
         assemble(VALID_TEXT, DATA, data_offset=round_up(n) + 64)),
        ("BadHeader", "data-offset-max", assemble(VALID_TEXT, DATA, data_offset=(1 << 64) - 64)),
        ("BadHeader", "data-length", assemble(VALID_TEXT, DATA, data_length=len(DATA) + 1)),
        ("BadHeader", "data-length-zero", assemble(VALID_TEXT, DATA, data_length=0)),
        # data_offset is the manifest's end rounded up to 64, nothing further (lengths agree).
        ("BadHeader", "data-offset-gap",
         assemble(VALID_TEXT, bytes(64) + DATA, data_offset=round_up(m_end) + 64,
                  data_length=len(DATA), file_length=n + 64)),
        # version 2: the checksum covers the manifest, the padding and the data
        ("BadHeader", "v2-checksum-data-flip", flipped(VALID2, len(VALID2) - 1, 7)),
        ("BadHeader", "v2-checksum-manifest-flip", flipped(VALID2, 100, 2)),
        ("BadHeader", "v2-checksum-padding-flip", flipped(VALID2, round_up(64 + len(
            VALID2_TEXT)) - 1)),
        ("BadHeader", "v2-checksum-field-flip", flipped(VALID2, 56)),
        ("BadHeader", "v2-checksum-zero", assemble(VALID2_TEXT, DATA, version=2, reserved=0)),
        ("BadHeader", "v2-checksum-high-bits",
         assemble(VALID2_TEXT, DATA, version=2,
                  reserved=(1 << 32) | crc32c_reference(VALID2[64:]))),
        ("BadHeader", "v2-truncated", VALID2[:-1]),
        ("BadHeader", "version-3-with-checksum", assemble(VALID2_TEXT, DATA, version=3,
                                                          reserved=0)),
        # manifest
        ("BadManifest", "invalid-utf8",
         assemble(VALID_TEXT.replace(b'"0.weight"', b'"0.we\xffight"', 1), DATA)),
        ("BadManifest", "overlong-utf8",
         assemble(VALID_TEXT.replace(b'"0.weight"', b'"0.\xc0\xafweight"', 1), DATA)),
        ("BadManifest", "bom", assemble(b"\xef\xbb\xbf" + VALID_TEXT, DATA)),
        ("BadManifest", "utf16", assemble(VALID_TEXT.decode().encode("utf-16-le"), DATA)),
        ("BadManifest", "utf16-bom", assemble(VALID_TEXT.decode().encode("utf-16"), DATA)),
        ("BadManifest", "lone-surrogate-name", edited('"0.weight"', '"0.weight\\ud800"')),
        ("BadManifest", "lone-surrogate-key", edited('"samples"', '"\\udc00samples"')),
        ("BadManifest", "depth-bomb", assemble(b"[" * 100000, DATA)),
        ("BadManifest", "depth-33", edited('"extra":[{"key":"samples","value":640}]',
                                           '"extra":' + "[" * 32 + "]" * 32)),
        # The reader bounds the manifest by the one its target writes (a committed 256 MiB
        # file is out of the question): valid JSON, padded past that bound with spaces.
        ("BadManifest", "oversize", assemble(VALID_TEXT + b" " * ((1 << 20) + (1 << 14)), DATA)),
        ("BadManifest", "empty", assemble(b"", DATA)),
        ("BadManifest", "truncated-json", assemble(VALID_TEXT[:-1], DATA)),
        ("BadManifest", "not-object", assemble(b"[]", DATA)),
        ("BadManifest", "not-object-string", assemble(b'"onemodel-checkpoint"', DATA)),
        # Brackets inside a string do not nest: a string, not too deep a structure.
        ("BadManifest", "string-of-brackets", assemble(b'"' + b"[" * 40 + b"{" * 40 + b'"',
                                                       DATA)),
        ("BadManifest", "v2-checksum-field-missing",
         built(manifest(version=1), version=2)),
        ("BadManifest", "v2-checksum-name", assemble(VALID2_TEXT.replace(
            b'"crc32c"', b'"xxh64"'), DATA, version=2)),
        ("BadManifest", "v2-manifest-version-1",
         assemble(VALID2_TEXT.replace(b'"version":2', b'"version":1'), DATA, version=2)),
        ("BadManifest", "v1-with-checksum-field", assemble(VALID2_TEXT.replace(
            b'"version":2', b'"version":1'), DATA)),
        # Caps: 65 dimensions; 60000 of them (rejected before they are looked at); 1025 extra
        # integers; and near-limit manifests of many small values, rejected fast.
        ("BadManifest", "rank-65", edited('"shape":[4,3]', '"shape":[' + ",".join(
            ["1"] * 63 + ["4", "3"]) + "]")),
        ("BadManifest", "rank-60000", edited('"shape":[4,3]', '"shape":[' + ",".join(
            ["1"] * 60000) + "]")),
        ("BadManifest", "extra-1025", built(manifest(extra=[(f"k{i:04d}", i)
                                                            for i in range(1025)]))),
        ("BadManifest", "extra-4000", built(manifest(extra=[(f"k{i:04d}", i)
                                                            for i in range(4000)]))),
        ("BadManifest", "nested-lists-16000", edited('"extra":[{"key":"samples","value":640}]',
                                                     '"extra":[' + ",".join(
                                                         ["[[[[[[[[]]]]]]]]"] * 16000) + "]")),
        ("BadManifest", "extra-objects-40000", edited(
            '"extra":[{"key":"samples","value":640}]', '"extra":[' + ",".join(["{}"] * 40000)
            + "]")),
        ("BadManifest", "trailing-garbage", assemble(VALID_TEXT + b"x", DATA)),
        ("BadManifest", "two-objects", assemble(VALID_TEXT + VALID_TEXT, DATA)),
        ("BadManifest", "duplicate-key",
         edited('{"format":"onemodel-checkpoint",',
                '{"format":"onemodel-checkpoint","format":"onemodel-checkpoint",')),
        ("BadManifest", "duplicate-key-entry", edited('"offset":0,', '"offset":0,"offset":0,')),
        ("BadManifest", "duplicate-extra-key",
         edited('{"key":"samples","value":640}',
                '{"key":"samples","value":640},{"key":"samples","value":640}')),
        ("BadManifest", "nan-literal", edited('"offset":0,', '"offset":NaN,')),
        ("BadManifest", "infinity-literal", edited('"length":48', '"length":Infinity')),
        ("BadManifest", "minus-infinity-literal", edited('"step":9', '"step":-Infinity')),
        ("BadManifest", "bool-for-int", edited('"version":1,', '"version":true,')),
        ("BadManifest", "float-for-int", edited('"offset":0,', '"offset":0.0,')),
        ("BadManifest", "exponent-for-int", edited('"length":48', '"length":4.8e1')),
        ("BadManifest", "int-over-64-bits", edited('"offset":0,', f'"offset":{1 << 64},')),
        ("BadManifest", "int-below-64-bits",
         edited('"offset":0,', f'"offset":{-(1 << 63) - 1},')),
        ("BadManifest", "int-5000-digits", edited('"step":9', '"step":' + "9" * 5000)),
        ("BadManifest", "missing-extra", with_manifest(lambda m: m.pop("extra"))),
        ("BadManifest", "missing-shape", with_manifest(lambda m: m["model"][0].pop("shape"))),
        ("BadManifest", "missing-step", with_manifest(lambda m: m["optimizer"].pop("step"))),
        ("BadManifest", "unknown-field", with_manifest(lambda m: m.update(comment="hi"))),
        ("BadManifest", "format-name", edited('"onemodel-checkpoint"', '"onemodel-model"')),
        ("BadManifest", "manifest-version", edited('"version":1,', '"version":2,')),
        ("BadManifest", "unknown-dtype", edited('"dtype":"f32"', '"dtype":"f16"')),
        ("BadManifest", "dtype-not-string", edited('"dtype":"f32"', '"dtype":4')),
        ("BadManifest", "name-not-string", edited('"name":"0.weight"', '"name":0')),
        ("BadManifest", "shape-not-list", edited('"shape":[4,3]', '"shape":12')),
        ("BadManifest", "negative-dim", edited('"shape":[4,3]', '"shape":[-4,3]')),
        ("BadManifest", "dim-2-62", edited('"shape":[4,3]', f'"shape":[{1 << 62},3]')),
        ("BadManifest", "shape-bytes-overflow",
         edited('"shape":[4,3]', f'"shape":[{1 << 40},{1 << 30}]')),
        ("BadManifest", "shape-bytes-2-63", edited('"shape":[4,3]', f'"shape":[{1 << 61}]')),
        # Empty, yet numpy refuses it: the extent of the nonzero dimensions counts.
        ("BadManifest", "zero-dim-extent",
         edited('"shape":[4,3]', f'"shape":[0,{1 << 31},{1 << 31}]')),
        ("BadManifest", "zero-dim-last-extent",
         edited('"shape":[4,3]', f'"shape":[{1 << 40},{1 << 30},0]')),
        # A tree (onemodel.save's) that names no tensor: refused whole, before any matching.
        ("BadManifest", "tree-not-object",
         edited('"extra":[{"key":"samples","value":640}]',
                '"extra":[{"key":"samples","value":640}],"tree":[]')),
        ("BadManifest", "step-negative", edited('"step":9', '"step":-1')),
        ("BadManifest", "hyper-bits-33", edited('"bits":0}', f'"bits":{1 << 32}}}')),
        ("BadManifest", "lr-nan", built(manifest(hyper=hyper_with("lr", math.nan)))),
        ("BadManifest", "lr-negative", built(manifest(hyper=hyper_with("lr", -0.001)))),
        ("BadManifest", "extra-value-2-63", built(manifest(extra=[("samples", 1 << 63)]))),
        ("BadManifest", "extra-value-string", edited('"value":640', '"value":"640"')),
        # mismatch against the target
        ("Mismatch", "wrong-name", built(manifest(model=[("0.w", "f32", [4, 3])] + MODEL[1:]))),
        ("Mismatch", "wrong-order", built(manifest(model=[MODEL[1], MODEL[0]] + MODEL[2:]))),
        ("Mismatch", "wrong-dtype",
         built(manifest(model=MODEL[:-1] + [("1.num_batches_tracked", "i32", [])]))),
        ("Mismatch", "wrong-shape", built(manifest(model=[("0.weight", "f32", [3, 4])]
                                                   + MODEL[1:]))),
        ("Mismatch", "wrong-rank", built(manifest(model=[("0.weight", "f32", [12])]
                                                  + MODEL[1:]))),
        # A shape that fits the format but would take 12 TiB: compared, never allocated.
        ("Mismatch", "huge-shape", edited('"shape":[4,3]', f'"shape":[{1 << 40},3]')),
        ("Mismatch", "extra-tensor", built(manifest(model=MODEL + [("2.weight", "f32", [4])]))),
        ("Mismatch", "missing-tensor", built(manifest(model=MODEL[:-1]))),
        ("Mismatch", "optimizer-kind", built(manifest(kind="SGD"))),
        ("Mismatch", "optimizer-kind-adam", built(manifest(kind="Adam"))),
        ("Mismatch", "fixed-beta1", built(manifest(hyper=hyper_with("beta1", 0.8)))),
        ("Mismatch", "fixed-beta2", built(manifest(hyper=hyper_with("beta2", 0.99)))),
        ("Mismatch", "fixed-eps", built(manifest(hyper=hyper_with("eps", 1e-6)))),
        ("Mismatch", "fixed-amsgrad", built(manifest(hyper=hyper_with("amsgrad", 1.0)))),
        ("Mismatch", "hyper-names", built(manifest(hyper=HYPER[:-1]))),
        ("Mismatch", "optimizer-state-shape",
         built(manifest(state=[("exp_avg.0", "f32", [12])] + OPT_STATE[1:]))),
        ("Mismatch", "optimizer-state-missing", built(manifest(state=OPT_STATE[:-1]))),
        ("Mismatch", "model-only-file", built(manifest(optimizer=False))),
        # u8 is a dtype of the format (packed optimizer state): on another tensor it is a type
        # that differs from the target's, like i32 for an f32, not an unknown name.
        ("Mismatch", "u8-for-f32", edited('"dtype":"f32","shape":[4,3],"offset":0,"length":48',
                                          '"dtype":"u8","shape":[4,3],"offset":0,"length":12')),
        ("Mismatch", "hyper-5000", hyper_entries(5000)),
        # offsets and lengths
        ("BadTensor", "length-short", with_entry(0, length=44)),
        ("BadTensor", "length-long", with_entry(0, length=52)),
        ("BadTensor", "length-negative", with_entry(0, length=-48)),
        ("BadTensor", "length-2-64-minus-1", with_entry(0, length=(1 << 64) - 1)),
        ("BadTensor", "offset-unaligned", with_entry(1, offset=96)),
        ("BadTensor", "offset-unaligned-8", with_entry(0, offset=8)),
        ("BadTensor", "offset-past-end", with_entry(-1, offset=round_up(len(DATA)) + 64)),
        ("BadTensor", "runs-past-end", with_entry(0, offset=last["offset"])),
        ("BadTensor", "offset-length-overflow", with_entry(0, offset=(1 << 63) - 64)),
        ("BadTensor", "offset-2-63", with_entry(0, offset=1 << 63)),
        ("BadTensor", "offset-u64-max", with_entry(0, offset=(1 << 64) - 64)),
        ("BadTensor", "negative-offset", with_entry(0, offset=-64)),
        ("BadTensor", "optimizer-offset-past-end",
         with_entry(-2, offset=round_up(len(DATA)) + 128)),
        # Only the writer's layout: no aliasing, no gap, zero padding, no bytes after the end.
        ("BadTensor", "aliased", with_entry(2, offset=VALID_MANIFEST["model"][1]["offset"])),
        ("BadTensor", "gap", with_entry(-1, offset=last["offset"] + 64)),
        ("BadTensor", "padding-nonzero", nonzero_padding_between_tensors()),
        ("BadTensor", "manifest-padding-nonzero",
         assemble(VALID_TEXT, DATA, padding=b"\1".rjust(round_up(m_end) - m_end, b"\0"))),
        ("BadTensor", "trailing-bytes", assemble(VALID_TEXT, DATA + bytes(64))),
        ("BadTensor", "trailing-byte", assemble(VALID_TEXT, DATA + b"\0")),
    ]
    return [(kind, name, data, True) for kind, name, data in out]


CASES = cases()


def path_of(kind: str, name: str) -> str:
    return os.path.join(FOLDER, f"{kind}-{name}.ckpt")


@pytest.mark.parametrize("version", [1, 2])
def test_valid_file_built_by_hand_loads_and_is_what_the_writer_writes(version):
    model, opt = make_target()
    valid = VALID2 if version == 2 else VALID
    extra = checkpoint.from_bytes(valid, model, opt)
    assert extra == {"samples": 640}
    assert opt.step_count == 9 and np.float32(opt.lr) == np.float32(0.002)
    assert checkpoint.to_bytes(model, opt, extra, version=version) == valid
    w = model[0].weight.detach().numpy()
    np.testing.assert_array_equal(w.ravel(), np.arange(12, dtype=np.float32) * 0.125)


def test_crc32c_kernel_on_every_path_equals_the_reference():
    from onemodel._kernels import _crc

    assert crc32c_reference(b"123456789") == 0xE3069283  # the standard check value
    assert crc32c_reference(b"") == 0
    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, (1 << 16) + 777, dtype=np.uint8).tobytes()
    # Every length to 600 (the folding path's blocks of 256, 64 and 16 bytes and its tails),
    # at several alignments, from several registers; then long inputs.
    cases = [(start, n) for n in range(601) for start in (0, 1, 7)] + [
        (5, 4096), (3, 65536), (0, len(data))]
    paths = _crc.available_paths()
    assert paths[0] == "table"
    for start, n in cases:
        piece = data[start:start + n]
        ref = crc32c_reference(piece)
        for path in paths:
            assert _crc.crc32c(piece, 0, path) == ref, (path, start, n)
        head = crc32c_reference(piece[:n // 3])
        assert _crc.crc32c(memoryview(piece)[n // 3:], head) == ref
    assert checkpoint._checksum([data[:1000], memoryview(data)[1000:]]) == \
        crc32c_reference(data)


def test_every_single_bit_flip_in_a_version_2_file_is_rejected():
    """Header, manifest, padding and data: every one of the file's bits, flipped alone."""
    model, opt = make_target()
    before = checkpoint.to_bytes(model, opt)
    m_end = 64 + len(VALID2_TEXT)
    regions = {"header": (0, 64), "manifest": (64, m_end), "padding": (m_end, round_up(m_end)),
               "data": (round_up(m_end), len(VALID2))}
    counts = {}
    for region, (lo, hi) in regions.items():
        kinds: dict[str, int] = {}
        for pos in range(lo, hi):
            for bit in range(8):
                with pytest.raises(checkpoint.CheckpointError) as info:
                    checkpoint.from_bytes(flipped(VALID2, pos, bit), model, opt)
                kinds[info.value.kind] = kinds.get(info.value.kind, 0) + 1
        counts[region] = kinds
        assert sum(kinds.values()) == 8 * (hi - lo) > 0
    print("rejected single-bit flips:", counts)
    # Past the header, every flip is the checksum's.
    assert all(set(counts[r]) == {"BadHeader"} for r in ("manifest", "padding", "data"))
    assert checkpoint.to_bytes(model, opt) == before
    assert opt.step_count == 5


def test_committed_files_equal_the_builder():
    names = {f"{kind}-{name}.ckpt" for kind, name, _, _ in CASES}
    assert len(names) == len(CASES) >= 41
    if WRITE:
        os.makedirs(FOLDER, exist_ok=True)
        for stale in set(os.listdir(FOLDER)) - names:
            os.unlink(os.path.join(FOLDER, stale))
        for kind, name, data, _ in CASES:
            with open(path_of(kind, name), "wb") as f:
                f.write(data)
    assert set(os.listdir(FOLDER)) == names
    for kind, name, data, _ in CASES:
        with open(path_of(kind, name), "rb") as f:
            assert f.read() == data, f"{kind}-{name}.ckpt differs from the builder's bytes"


@pytest.mark.parametrize("kind,name,data,with_optimizer", CASES,
                         ids=[f"{k}-{n}" for k, n, _, _ in CASES])
def test_hostile_file_raises_its_kind_and_changes_nothing(kind, name, data, with_optimizer):
    model, opt = make_target()
    before = checkpoint.to_bytes(model, opt)
    for source in ("memory", "file"):
        with pytest.raises(checkpoint.CheckpointError) as info:
            if source == "memory":
                checkpoint.from_bytes(data, model, opt if with_optimizer else None)
            else:
                checkpoint.load(path_of(kind, name), model, opt if with_optimizer else None)
        assert type(info.value) is KINDS[kind], f"{source}: {info.value!r}"
        assert info.value.kind == kind
        assert checkpoint.to_bytes(model, opt) == before
        assert opt.step_count == 5 and np.float32(opt.lr) == np.float32(0.0025)


def test_model_only_load_ignores_a_bad_optimizer_mismatch_but_not_a_bad_manifest():
    model, opt = make_target()
    # Kind and fixed settings only matter when the optimizer is asked for.
    assert checkpoint.from_bytes(built(manifest(kind="SGD")), model) == {"samples": 640}
    with pytest.raises(checkpoint.BadManifest):
        checkpoint.from_bytes(edited('"step":9', '"step":-1'), model)


def test_every_truncation_and_every_single_byte_flip_raises_only_checkpoint_errors():
    model, opt = make_target()
    before = checkpoint.to_bytes(model, opt)
    for n in range(len(VALID)):
        with pytest.raises(checkpoint.CheckpointError):
            checkpoint.from_bytes(VALID[:n], model, opt)
    rng = np.random.default_rng(0)
    for pos in rng.integers(0, 64 + len(VALID_TEXT), 300):
        data = bytearray(VALID)
        data[pos] ^= 1 << int(rng.integers(8))
        try:
            checkpoint.from_bytes(bytes(data), model, opt)
        except checkpoint.CheckpointError:
            assert checkpoint.to_bytes(model, opt) == before
        else:  # a flip that keeps the file valid (a value in a name's digit, say) loads it
            model, opt = make_target()


@pytest.mark.slow
def test_fuzz_harness_smoke():
    """2000 random mutations of the seeds (valid files of four targets and the hostile files)
    through tools/fuzz_checkpoint.py's harness: only CheckpointError, and a rejected input
    never changes its target."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "fuzz_checkpoint", os.path.join(os.path.dirname(FOLDER), os.pardir, os.pardir, "tools",
                                        "fuzz_checkpoint.py"))
    fuzz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz)
    # The repaired header of a valid file is the file itself.
    assert fuzz.repaired(VALID) == VALID and fuzz.repaired(VALID2) == VALID2
    outcomes = fuzz.smoke(2000, seed=1)
    assert set(outcomes) == {"loaded", *KINDS}, outcomes
