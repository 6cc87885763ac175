"""Plain-text tables, as tabulate's "simple" format lays them out.

tabulate works out a type for every cell, even with number parsing off: seconds for the per-layer
table of a 10,000-layer net. Cells of printable ASCII without edge spaces (every cell protoaudit
writes, in practice) are laid out here the same way, column by column; any other cell (wide
characters, line breaks, escape codes, edge spaces) goes to tabulate, which knows those cases.
"""
import itertools

GAP = "  "  # between columns
MIN_PADDING = 2  # a column is at least its header and two spaces wide
# A cell longer than this (a 200,000-character name, the shapes of a Split's 10,000 tops; no corpus
# net comes near: its longest cell has 94) is shown by its ends: every row is padded to the widest
# cell of its column, so one such cell would make the table rows x its width.
MAX_CELL = 200


def shortened(cell):
    """The cell, or its ends around the number of characters left out."""
    if not isinstance(cell, str) or len(cell) <= MAX_CELL:
        return cell
    keep = (MAX_CELL - len(f" [... {len(cell):,} characters ...] ")) // 2
    return cell[:keep] + f" [... {len(cell) - 2 * keep:,} characters ...] " + cell[len(cell) - keep:]


class Rows:
    """Rows made anew from `items` each time they are read (simple_table_lines reads its rows twice:
    the widths, then the lines), by `cells(item)`."""

    def __init__(self, items, cells):
        self.items, self.cells = items, cells

    def __iter__(self):
        return map(self.cells, self.items)


class ColumnRows:
    """Rows made from the list `items` as they are read, for simple_table_lines, which reads them
    twice: the per-layer table of a 100,000-layer net held as cells would be 50 MB. They are made a
    chunk at a time, column by column (`columns(chunk)`: a list of each column's cells), which
    takes no call per row. The columns at `kept` hold the cells that cost the most to make and
    are each item's own: they are made on the first reading only and kept as text, a chunk's
    column as one string (some 7 MB for that table), and given back to `columns(chunk, those
    columns)` on the next."""

    def __init__(self, items, columns, kept):
        self.items, self.columns, self.kept = items, columns, kept
        self.text = None  # per chunk of items, each kept column's cells joined by line breaks

    def __iter__(self):
        return self._again() if self.text else self._first()

    def _first(self):
        text = []
        for chunk in _chunks(self.items):
            columns = self.columns(chunk)
            joined = ["\n".join(columns[i]) for i in self.kept]
            if text is not None and all(t.count("\n") == len(chunk) - 1 for t in joined):
                text.append(joined)
            else:  # a cell with a line break of its own: nothing kept, made again next time
                text = None
            yield from zip(*columns)
        self.text = text

    def _again(self):
        for chunk, joined in zip(_chunks(self.items), self.text):
            yield from zip(*self.columns(chunk, [t.split("\n") for t in joined]))


def _chunks(items):
    return (items[i:i + CHUNK] for i in range(0, len(items), CHUNK))


def simple_table(rows, headers):
    """tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True): string cells."""
    return "\n".join(simple_table_lines(rows, headers))


def simple_table_lines(rows, headers, fit=None):
    """simple_table's lines, one at a time (tabulate's table, when it lays the table out, comes as
    one). `rows` is read twice: a list, Rows or ColumnRows. `fit`: (width, {column: (narrowest,
    shorten(cell, width))}): the table is made at most `width` characters wide where those
    columns, made narrower down to their narrowest, can do it, each cell shortened by its column's
    `shorten`."""
    widths = _widths(rows, headers)
    if widths is not None and max(widths) > MAX_CELL:
        rows = Rows(rows, _shortened_row)
        widths = _widths(rows, headers)
    if widths is not None and fit is not None:
        narrower = _narrowed(widths, *fit)
        if narrower != widths:
            shorten = {i: (w, fit[1][i][1]) for i, w in enumerate(narrower) if w < widths[i]}
            rows, widths = Rows(rows, lambda row: _fitted(row, shorten)), narrower
    if widths is None:
        from tabulate import tabulate

        yield tabulate(list(map(_shortened_row, rows)), headers=headers, tablefmt="simple", disable_numparse=True)
        return
    line = GAP.join(f"%-{w}s" for w in widths)  # every cell a str: printf's padding is format's, made faster
    yield (line % tuple(headers)).rstrip()
    yield GAP.join("-" * w for w in widths)
    yield from map(str.rstrip, map(line.__mod__, map(tuple, rows)))  # tabulate ends each row at its last character


def _narrowed(widths, width, shrinkable):
    """`widths` with the widest of the `shrinkable` columns made narrower, one character at a time,
    until the table is `width` wide or each is at its narrowest."""
    widths = list(widths)
    excess = sum(widths) + len(GAP) * (len(widths) - 1) - width
    while excess > 0:
        room = [(widths[i], i) for i, (least, _) in shrinkable.items() if widths[i] > max(least, len(GAP))]
        if not room:
            break
        _, i = max(room)
        widths[i] -= 1
        excess -= 1
    return widths


def _fitted(row, shorten):
    row = list(row)
    for i, (width, how) in shorten.items():
        if len(row[i]) > width:
            row[i] = how(row[i], width)
    return row


def middle(cell, width):
    """The cell's ends around "...", `width` characters in all (the full text is in JSON and HTML)."""
    if len(cell) <= width:
        return cell
    head = (width - 3 + 1) // 2
    return cell[:head] + "..." + cell[len(cell) - (width - 3 - head):] if width > 3 else cell[:width]


def _shortened_row(row):
    return [shortened(c) for c in row]


CHUNK = 4096  # rows whose cells are checked at once


def _widths(rows, headers):
    """Each column's width: its widest cell, or its header and two spaces; None for what only
    tabulate lays out as tabulate does (no rows, a row of another length, a cell not plain)."""
    if not _all_plain(headers):
        return None
    widths = [len(h) + MIN_PADDING for h in headers]
    rows = iter(rows)
    found = False
    while True:
        chunk = list(itertools.islice(rows, CHUNK))
        if not chunk:
            return widths if found else None
        found = True
        if set(map(len, chunk)) != {len(headers)} or set(map(type, itertools.chain.from_iterable(chunk))) != {str}:
            return None
        columns = [set(column) for column in zip(*chunk)]  # each cell once: a column repeats most of its cells
        if not _all_plain(list(itertools.chain.from_iterable(columns))):
            return None
        widths = [max(w, max(map(len, column))) for w, column in zip(widths, columns)]


def _all_plain(cells):
    """Whether every cell is a str of printable ASCII with no space at either end (checked on all
    the cells at once: printable, the cells joined; no edge space, one cell per line)."""
    if set(map(type, cells)) != {str}:
        return False
    text = "".join(cells)
    if not (text.isascii() and text.isprintable()):  # no cell holds a line break, then
        return False
    lines = "\n".join(cells)
    return not lines.startswith(" ") and not lines.endswith(" ") and "\n " not in lines and " \n" not in lines
