"""Write the test fixture of ``pytest_mxperf`` 's fat binary reader from a real MXNet wheel:
the ``.nv_fatbin`` headers of a few containers of its ``libmxnet.so``, payloads cut short.

Why: the tests must read what NVIDIA's tools really wrote, but a wheel is 500 MB and cannot be
downloaded by the test suite. The fixture keeps each kept container's header and every entry
header byte for byte; only the two payload sizes of an entry (bytes 8-15 and 16-23) are set to
the few payload bytes kept, and the container's size to what remains, so the walk is the same.

    python -m pip download --no-deps -d /tmp/w mxnet-cu112==1.9.1
    python scripts/fatbin_fixture.py /tmp/w/mxnet_cu112-1.9.1-*.whl \\
        tests/unit/data/mxnet-cu112-1.9.1-nv_fatbin.hex
"""

from __future__ import annotations

import argparse
import hashlib
import mmap
import struct
import tempfile
import zipfile
from pathlib import Path

from pytest_mxperf.system import fatbin

KEEP_PAYLOAD = 16  # bytes of each entry's (compressed) payload kept
LIBRARY = "mxnet/libmxnet.so"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def cut(data: bytes | mmap.mmap, offset: int, size: int, keep: list[int]) -> tuple[bytes, int]:
    """The containers numbered ``keep`` of the section at ``offset``, payloads cut to
    ``KEEP_PAYLOAD`` bytes; and how many containers the section has."""
    out = bytearray()
    pos, index = offset, 0
    while pos + 16 <= offset + size:
        magic, version, header_size, fat_size = struct.unpack_from("<IHHQ", data, pos)
        if magic != fatbin.FATBIN_MAGIC:
            raise SystemExit(f"no fat binary header at {pos:#x}")
        if index in keep:
            body = bytearray()
            at, end = pos + header_size, pos + header_size + fat_size
            while at < end:
                entry_size, padded = struct.unpack_from("<IQ", data, at + 4)
                header = bytearray(data[at : at + entry_size])
                struct.pack_into("<QQ", header, 8, KEEP_PAYLOAD, KEEP_PAYLOAD)
                body += header + data[at + entry_size : at + entry_size + KEEP_PAYLOAD]
                at += entry_size + padded
            out += struct.pack("<IHHQ", magic, version, header_size, len(body)) + body
        pos += header_size + fat_size
        index += 1
    return bytes(out), index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(args.wheel) as wheel:
            library = Path(wheel.extract(LIBRARY, tmp))
        with open(library, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            offset, size = fatbin.elf_sections(data)[".nv_fatbin"]
            _, count = cut(data, offset, size, [])
            keep = sorted({0, 1, count // 2, count - 1})
            section, _ = cut(data, offset, size, keep)
        lib_sha = sha256(library)
    lines = [
        f"# .nv_fatbin of {LIBRARY} in {args.wheel.name}",
        f"# wheel sha256 {sha256(args.wheel)}",
        f"# {LIBRARY} sha256 {lib_sha}",
        f"# containers {', '.join(map(str, keep))} of {count}: headers as written, each entry's",
        f"# payload cut to its first {KEEP_PAYLOAD} bytes (sizes at entry bytes 8-23 set to",
        "# that) and each container's size to what remains; written by scripts/fatbin_fixture.py",
    ]
    lines += [section[i : i + 32].hex() for i in range(0, len(section), 32)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="ascii")
    print(f"{args.out}: {len(section)} bytes, containers {keep} of {count}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
