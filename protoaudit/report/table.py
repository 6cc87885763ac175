"""Plain-text tables, as tabulate's "simple" format lays them out.

tabulate works out a type for every cell, even with number parsing off: seconds for the per-layer
table of a 10,000-layer net. Cells of printable ASCII without edge spaces (every cell protoaudit
writes, in practice) are laid out here the same way, column by column; any other cell (wide
characters, line breaks, escape codes, edge spaces) goes to tabulate, which knows those cases.
"""
import re

GAP = "  "  # between columns
MIN_PADDING = 2  # a column is at least its header and two spaces wide
_EDGE_SPACE = re.compile("^ | $", re.MULTILINE)
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


def simple_table(rows, headers):
    """tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True): string cells."""
    if not rows or any(len(row) != len(headers) for row in rows) or not _all_plain(headers, rows):
        from tabulate import tabulate

        rows = [[shortened(c) for c in row] for row in rows]
        return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)
    widths = [max(len(h) + MIN_PADDING, max(map(len, column))) for h, column in zip(headers, zip(*rows))]
    if max(widths) > MAX_CELL:
        rows = [[shortened(c) for c in row] for row in rows]
        widths = [max(len(h) + MIN_PADDING, max(map(len, column))) for h, column in zip(headers, zip(*rows))]
    line = GAP.join(f"{{:<{w}}}" for w in widths).format
    out = [line(*headers).rstrip(), GAP.join("-" * w for w in widths)]
    out += [line(*row).rstrip() for row in rows]  # tabulate ends each row at its last character
    return "\n".join(out)


def _all_plain(headers, rows):
    """Whether every cell is a str of printable ASCII with no space at either end (checked on all
    the cells at once: one per line of one string)."""
    cells = list(headers)
    for row in rows:
        cells += row
    if set(map(type, cells)) != {str}:
        return False
    lines = "\n".join(cells)
    return (lines.count("\n") == len(cells) - 1 and lines.isascii() and lines.replace("\n", "").isprintable()
            and not _EDGE_SPACE.search(lines))
