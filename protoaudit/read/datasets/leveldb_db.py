"""The first record of a LevelDB (Caffe's default backend), read without opening it read-write.

Caffe's LevelDB::Open (db_leveldb.cpp) goes through leveldb::DB::Open, which has no read-only
mode: it takes the LOCK file, replays the log into a new table, writes a new MANIFEST and log and
deletes the old ones. The Python bindings (plyvel) do the same. protoaudit must never write into a
user's dataset, so it reads the files itself, read-only, as LevelDB's own format documents them
(leveldb/doc/log_format.md, table_format.md, db/version_edit.cc, db/write_batch.cc), and copies
nothing:

- CURRENT names the MANIFEST; its version edits give the live table files, each with its smallest
  key, and the number of the oldest log still to replay.
- Those logs (records not yet in a table: a fresh Caffe dataset under 256 MB lives entirely in its
  log, since convert_imageset writes with a 256 MB write buffer) are scanned for their keys; values
  are skipped, not kept.
- The first key is the smallest user key among the tables' smallest keys and the logs' keys, its
  newest version winning, as a DB iterator's SeekToFirst finds it. Its value is read from the log,
  or from the first data block of the table that starts with it (snappy-compressed blocks are
  expanded with cramjam).

Checksums are not verified; a structure that does not parse is reported as corrupt.
"""
import os
import struct

from . import DatasetError, library

BLOCK = 32768  # the log's block size
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
TABLE_MAGIC = 0xDB4775248B80FB57
VALUE, DELETION = 1, 0


def varint(buf, pos):
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def sliced(buf, pos):
    n, pos = varint(buf, pos)
    if pos + n > len(buf):
        raise ValueError("truncated slice")
    return bytes(buf[pos:pos + n]), pos + n


def log_records(path):
    """The logical records of a LevelDB log file (the MANIFEST is one too), fragments joined."""
    if not os.path.isfile(path):  # a pipe would be waited on forever, a device never ends
        raise ValueError(f"{os.path.basename(path)} is not a file")
    with open(path, "rb") as f:
        pending = None
        while True:
            block = f.read(BLOCK)
            if not block:
                break
            pos = 0
            while pos + 7 <= len(block):
                length, kind = struct.unpack_from("<HB", block, pos + 4)
                if kind == 0 and length == 0:  # zero padding (preallocated space)
                    break
                start, pos = pos + 7, pos + 7 + length
                if pos > len(block) or kind not in (FULL, FIRST, MIDDLE, LAST):
                    raise ValueError(f"bad log record at offset {f.tell() - len(block) + start - 7}")
                piece = block[start:pos]
                if kind == FULL:
                    yield piece
                elif kind == FIRST:
                    pending = [piece]
                elif pending is not None:
                    pending.append(piece)
                    if kind == LAST:
                        yield b"".join(pending)
                        pending = None


def manifest(path):
    """(comparator, log number, {file number: smallest internal key}) of the live tables."""
    comparator, log_number, live = "leveldb.BytewiseComparator", 0, {}
    for record in log_records(path):
        pos = 0
        while pos < len(record):
            tag, pos = varint(record, pos)
            if tag == 1:
                name, pos = sliced(record, pos)
                comparator = name.decode("latin-1")
            elif tag in (2, 3, 4, 9):
                value, pos = varint(record, pos)
                if tag == 2:
                    log_number = value
            elif tag == 5:
                _, pos = varint(record, pos)
                _, pos = sliced(record, pos)
            elif tag == 6:
                _, pos = varint(record, pos)
                number, pos = varint(record, pos)
                live.pop(number, None)
            elif tag == 7:
                _, pos = varint(record, pos)
                number, pos = varint(record, pos)
                _, pos = varint(record, pos)
                smallest, pos = sliced(record, pos)
                _, pos = sliced(record, pos)
                live[number] = smallest
            else:
                raise ValueError(f"unknown MANIFEST tag {tag}")
    return comparator, log_number, live


def log_entries(path):
    """(user key, sequence, kind, value) of every write in a log file, in order."""
    for record in log_records(path):
        if len(record) < 12:
            raise ValueError("short write batch")
        sequence, count = struct.unpack_from("<QI", record, 0)
        pos = 12
        for i in range(count):
            kind = record[pos]
            key, pos = sliced(record, pos + 1)
            value = None
            if kind == VALUE:
                n, pos = varint(record, pos)
                value, pos = (record, pos, n), pos + n  # where the value is: copied only for the winner
                if pos > len(record):
                    raise ValueError("truncated value")
            elif kind != DELETION:
                raise ValueError(f"unknown write kind {kind}")
            yield key, sequence + i, kind, value


def split_internal(key):
    if len(key) < 8:
        raise ValueError("internal key shorter than 8 bytes")
    trailer = struct.unpack("<Q", key[-8:])[0]
    return key[:-8], trailer >> 8, trailer & 0xFF


def read_block(f, offset, size):
    """A table block's contents, expanded if snappy-compressed (its 5-byte trailer: type, crc)."""
    f.seek(offset)
    data = f.read(size + 5)
    if len(data) != size + 5:
        raise ValueError("block past the end of the table file")
    kind = data[size]
    if kind == 0:
        return data[:size]
    if kind == 1:
        cramjam = library("cramjam", "a LevelDB's snappy-compressed table")
        try:
            return bytes(cramjam.snappy.decompress_raw(data[:size]))
        except Exception as e:  # cramjam's DecompressionError
            raise ValueError(f"bad snappy block: {e}") from None
    raise ValueError(f"unknown block compression {kind}")


def first_entry(block):
    """(internal key, value) of a block's first entry (its shared prefix is empty)."""
    if len(block) < 4:
        raise ValueError("short block")
    restarts = struct.unpack_from("<I", block, len(block) - 4)[0]
    end = len(block) - 4 - 4 * restarts
    if end <= 0:
        raise ValueError("empty block")
    shared, pos = varint(block, 0)
    unshared, pos = varint(block, pos)
    length, pos = varint(block, pos)
    if shared or pos + unshared + length > end:
        raise ValueError("bad first block entry")
    return bytes(block[pos:pos + unshared]), bytes(block[pos + unshared:pos + unshared + length])


def table_first(path):
    """(internal key, value) of a table file's first entry: footer -> index block -> first data block."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size < 48:
            raise ValueError("table file shorter than its footer")
        f.seek(size - 48)
        footer = f.read(48)
        if struct.unpack_from("<Q", footer, 40)[0] != TABLE_MAGIC:
            raise ValueError("no table magic number")
        _, pos = varint(footer, 0)
        _, pos = varint(footer, pos)
        index_offset, pos = varint(footer, pos)
        index_size, pos = varint(footer, pos)
        _, handle = first_entry(read_block(f, index_offset, index_size))
        offset, pos = varint(handle, 0)
        length, _ = varint(handle, pos)
        return first_entry(read_block(f, offset, length))


def table_path(folder, number):
    for ext in ("ldb", "sst"):
        path = os.path.join(folder, f"{number:06d}.{ext}")
        if os.path.isfile(path):
            return path
    raise ValueError(f"table {number:06d}.ldb named by the MANIFEST is missing")


def first_record(path):
    """(key, value bytes) of the LevelDB folder `path`."""
    if not os.path.isdir(path):
        raise DatasetError(f"{path} is not a folder: Caffe's LevelDB source is the database's folder")
    current = os.path.join(path, "CURRENT")
    if not os.path.isfile(current):
        found = "an LMDB (it has data.mdb)" if os.path.isfile(os.path.join(path, "data.mdb")) else "no CURRENT file"
        raise DatasetError(f"{path} is not a LevelDB: {found}",
                           fix="set data_param { backend: LMDB } for an LMDB (LevelDB is Caffe's default)"
                           if "LMDB" in found else None)
    try:
        with open(current, "rb") as f:
            name = f.read(256).decode("latin-1").strip()
        if not name.startswith("MANIFEST-") or os.sep in name:
            raise ValueError(f"CURRENT names '{name[:40]}', not a MANIFEST")
        comparator, log_number, live = manifest(os.path.join(path, name))
        if comparator != "leveldb.BytewiseComparator":
            raise ValueError(f"keys ordered by '{comparator}', not Caffe's bytewise order")
        best = None  # (user key, -sequence): the smallest key, its newest version first
        where = None
        for number, smallest in live.items():
            user, sequence, kind = split_internal(smallest)
            if best is None or (user, -sequence) < best:
                best, where = (user, -sequence), ("table", number, kind)
        with os.scandir(path) as entries:  # not listdir: a folder may hold a million other names
            logs = sorted(int(e.name[:-4]) for e in entries if e.name.endswith(".log") and e.name[:-4].isdigit())
        for number in (n for n in logs if n >= log_number):
            for user, sequence, kind, value in log_entries(os.path.join(path, f"{number:06d}.log")):
                if best is None or (user, -sequence) < best:
                    best, where = (user, -sequence), ("log", value, kind)
        if best is None:
            raise DatasetError(f"{path}: the LevelDB is empty (Caffe's first read fails)")
        if where[2] != VALUE:
            raise DatasetError(f"{path}: the LevelDB's first key was deleted; protoaudit reads the first record "
                               "only", fix="give --input with the data top's shape")
        if where[0] == "log":
            record, pos, n = where[1]
            return best[0], bytes(record[pos:pos + n])
        key, value = table_first(table_path(path, where[1]))
        if split_internal(key)[0] != best[0]:
            raise ValueError("a table's first key is not the one its MANIFEST entry gives")
        return best[0], value
    except (ValueError, struct.error, OSError) as e:
        raise DatasetError(f"{path}: corrupt LevelDB: {e}") from None
