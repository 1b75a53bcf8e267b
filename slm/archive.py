"""One file out of a zip archive that was cut into equal parts (``split -b``, 7-Zip's
``.zip.001``, ``.zip.002``, ...), of which only the last parts are at hand.

Such an archive's offsets count from the start of its first part, so the parts at hand are
read as one stream that begins ``ZipMember.start`` bytes into the archive. The central
directory (at the end of the last part) names the member; its entry's compression, size and
CRC-32 are checked against the pinned ones before a byte is written. The member is then
inflated from its local header through the parts, and its size and CRC-32 are checked again
at the end. Every mismatch is a ``ConfigError`` that says what differed.

>>> import io, os, tempfile, zipfile
>>> raw = io.BytesIO()
>>> with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as z:
...     z.writestr("other.bin", os.urandom(600))  # fills the first parts
...     z.writestr("model.gguf", b"GGUF" + bytes(1000))
>>> blob, size = raw.getvalue(), 200
>>> with tempfile.TemporaryDirectory() as d:
...     parts = []
...     for i in range(1, len(blob) // size + 2):  # the archive cut into 200-byte parts
...         parts.append(Path(d) / f"a.zip.{i:03d}")
...         _ = parts[-1].write_bytes(blob[(i - 1) * size : i * size])
...     crc = zlib.crc32(b"GGUF" + bytes(1000))
...     member = ZipMember("model.gguf", start=size, size=1004, crc32=crc)
...     out = io.BytesIO()
...     extract(parts[1:], member, out)  # the first part holds only the other file
>>> out.getvalue()[:4], len(out.getvalue())
(b'GGUF', 1004)
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

from tiermem.errors import ConfigError

_EOCD: Final = struct.Struct("<IHHHHIIH")  # end of central directory record
_CENTRAL: Final = struct.Struct("<IHHHHHHIIIHHHHHII")  # central directory file header
_LOCAL: Final = struct.Struct("<IHHHHHIIIHH")  # local file header
_EOCD_SIG, _CENTRAL_SIG, _LOCAL_SIG = 0x06054B50, 0x02014B50, 0x04034B50
_STORED, _DEFLATED = 0, 8
_ZIP64: Final = 0xFFFFFFFF
_BLOCK: Final = 1 << 22


@dataclass(frozen=True, slots=True)
class ZipMember:
    """The file ``name`` of a cut archive, with what it must turn out to be: ``size`` bytes
    and CRC-32 ``crc32``. ``start`` is the archive offset of the first part at hand."""

    name: str
    start: int
    size: int
    crc32: int


class _Parts:
    """Consecutive files read as one stream of archive offsets from ``start``."""

    def __init__(self, parts: Sequence[Path], start: int) -> None:
        if not parts:
            raise ConfigError("no archive parts to read")
        self._parts = list(parts)
        self._starts: list[int] = []
        offset = start
        for part in self._parts:
            self._starts.append(offset)
            offset += part.stat().st_size
        self.start, self.end = start, offset

    def chunks(self, offset: int, length: int) -> Iterator[bytes]:
        """The ``length`` bytes at archive offset ``offset``, in blocks, across parts."""
        if offset < self.start or offset + length > self.end:
            raise ConfigError(
                f"archive bytes {offset}..{offset + length} lie outside the parts at hand "
                f"({self.start}..{self.end})"
            )
        for part, first in zip(self._parts, self._starts, strict=True):
            size = part.stat().st_size
            if length <= 0:
                return
            if offset >= first + size:
                continue
            with part.open("rb") as handle:
                handle.seek(offset - first)
                take = min(length, first + size - offset)
                while take > 0:
                    block = handle.read(min(_BLOCK, take))
                    if not block:
                        raise ConfigError(f"{part} ended early")
                    yield block
                    take -= len(block)
                    offset += len(block)
                    length -= len(block)

    def read(self, offset: int, length: int) -> bytes:
        return b"".join(self.chunks(offset, length))


@dataclass(frozen=True, slots=True)
class _Entry:
    method: int
    flags: int
    crc32: int
    compressed: int
    size: int
    header: int  # archive offset of the local header


def _central_entry(parts: _Parts, name: str) -> _Entry:
    tail_from = max(parts.start, parts.end - (1 << 16) - _EOCD.size)
    tail = parts.read(tail_from, parts.end - tail_from)
    at = tail.rfind(struct.pack("<I", _EOCD_SIG))
    if at < 0:
        raise ConfigError("the last archive part has no zip end record: it is not a zip's end")
    fields = _EOCD.unpack_from(tail, at)
    directory_size, directory_at = fields[5], fields[6]
    if _ZIP64 in (directory_size, directory_at):
        raise ConfigError("the archive is zip64, which this reader does not read")
    directory = parts.read(directory_at, directory_size)
    pos = 0
    while pos + _CENTRAL.size <= len(directory):
        row = _CENTRAL.unpack_from(directory, pos)
        if row[0] != _CENTRAL_SIG:
            raise ConfigError(f"the archive's central directory is damaged at byte {pos}")
        name_len, extra_len, comment_len = row[10], row[11], row[12]
        start = pos + _CENTRAL.size
        if directory[start : start + name_len].decode("utf-8", "replace") == name:
            return _Entry(row[4], row[3], row[7], row[8], row[9], row[16])
        pos = start + name_len + extra_len + comment_len
    raise ConfigError(f"the archive holds no {name!r}")


def _inflated(blocks: Iterator[bytes], method: int) -> Iterator[bytes]:
    if method == _STORED:
        yield from blocks
        return
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    try:
        for block in blocks:
            yield inflater.decompress(block)
        yield inflater.flush()
    except zlib.error as exc:
        raise ConfigError(f"the member's compressed data is damaged: {exc}") from exc
    if not inflater.eof:
        raise ConfigError("the member's compressed data ends early")


def extract(parts: Sequence[Path], member: ZipMember, out: BinaryIO) -> None:
    """Write ``member`` out of the archive whose parts from ``member.start`` on are ``parts``;
    a ``ConfigError`` if it is not there, not as pinned, or damaged."""
    stream = _Parts(parts, member.start)
    entry = _central_entry(stream, member.name)
    if entry.flags & 1:
        raise ConfigError(f"{member.name} is encrypted")
    if entry.method not in (_STORED, _DEFLATED):
        raise ConfigError(f"{member.name} is compressed by method {entry.method}, not deflate")
    if (entry.size, entry.crc32) != (member.size, member.crc32):
        raise ConfigError(
            f"{member.name} in the archive is {entry.size} bytes, CRC-32 {entry.crc32:#010x}; "
            f"expected {member.size} bytes, {member.crc32:#010x}"
        )
    local = _LOCAL.unpack(stream.read(entry.header, _LOCAL.size))
    if local[0] != _LOCAL_SIG:
        raise ConfigError(f"{member.name}: no local header at archive byte {entry.header}")
    data_at = entry.header + _LOCAL.size + local[9] + local[10]
    crc, written = 0, 0
    for block in _inflated(stream.chunks(data_at, entry.compressed), entry.method):
        crc = zlib.crc32(block, crc)
        written += len(block)
        out.write(block)
    if (written, crc) != (member.size, member.crc32):
        raise ConfigError(
            f"{member.name} came out {written} bytes, CRC-32 {crc:#010x}; expected "
            f"{member.size} bytes, {member.crc32:#010x}: a part is damaged"
        )
