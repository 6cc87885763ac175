"""The first record of an LMDB, as Caffe's LMDBCursor reads it at setup (db_lmdb.cpp: MDB_FIRST).

Opened read-only and without the lock file (`lmdb.open(readonly=True, lock=False)`), so nothing
is written into the dataset folder, not even `lock.mdb` (Caffe itself opens it with MDB_RDONLY but
takes the lock). Only the first key's value is read, whatever the database's size: LMDB maps the
file and walks its B-tree to the first leaf.
"""
import os
import struct

from . import DatasetError, library

MAGIC = 0xBEEFC0DE


def check_meta(path):
    """LMDB's two meta pages (mdb.c, MDB_meta): a file that is not an LMDB, or is cut short (its
    last page past the end, which the C library would fault on when mapping), is refused here."""
    data = os.path.join(path, "data.mdb")
    size = os.path.getsize(data)
    with open(data, "rb") as f:
        head = f.read(152)
        if len(head) < 152 or struct.unpack_from("<I", head, 16)[0] != MAGIC:
            raise DatasetError(f"{data} is not an LMDB data file (no LMDB meta page)")
        page = struct.unpack_from("<I", head, 40)[0]  # mm_dbs[FREE_DBI].md_pad: the page size
        if page < 512 or page & (page - 1):
            raise DatasetError(f"{data}: corrupt LMDB meta page (page size {page})")
        f.seek(page)
        second = f.read(152)
    metas = [head] + ([second] if len(second) == 152 and struct.unpack_from("<I", second, 16)[0] == MAGIC else [])
    last_page, _ = max((struct.unpack_from("<QQ", m, 136) for m in metas), key=lambda m: m[1])
    if (last_page + 1) * page > size:
        raise DatasetError(f"{data} is cut short: its meta page says {(last_page + 1) * page:,} bytes, "
                           f"the file has {size:,}")


def first_record(path):
    """(key, value bytes, number of records) of the LMDB folder `path`."""
    if not os.path.isdir(path):
        raise DatasetError(f"{path} is not a folder: Caffe's LMDB source is the folder holding data.mdb")
    if not os.path.isfile(os.path.join(path, "data.mdb")):
        found = "a LevelDB (it has CURRENT)" if os.path.isfile(os.path.join(path, "CURRENT")) else "no data.mdb"
        raise DatasetError(f"{path} is not an LMDB: {found}",
                           fix="set data_param { backend: LEVELDB } for a LevelDB" if "LevelDB" in found else None)
    check_meta(path)
    lmdb = library("lmdb", "an LMDB")
    try:
        env = lmdb.open(path, readonly=True, lock=False, subdir=True, readahead=False, max_dbs=0)
    except lmdb.Error as e:
        raise DatasetError(f"{path}: cannot open the LMDB: {e}") from None
    try:
        with env.begin(buffers=False) as txn:
            entries = txn.stat()["entries"]
            cursor = txn.cursor()
            if not cursor.first():
                raise DatasetError(f"{path}: the LMDB is empty (Caffe's first read fails)")
            return cursor.key(), cursor.value(), entries
    except lmdb.Error as e:
        raise DatasetError(f"{path}: corrupt LMDB: {e}") from None
    finally:
        env.close()
