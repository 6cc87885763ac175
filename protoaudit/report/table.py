"""Plain-text tables, as tabulate's "simple" format lays them out.

tabulate works out a type for every cell, even with number parsing off: seconds for the per-layer
table of a 10,000-layer net. Cells of printable ASCII without edge spaces (every cell protoaudit
writes, in practice) are laid out here the same way, column by column; any other cell (wide
characters, line breaks, escape codes, edge spaces) goes to tabulate, which knows those cases.
"""
GAP = "  "  # between columns
MIN_PADDING = 2  # a column is at least its header and two spaces wide


def simple_table(rows, headers):
    """tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True): string cells."""
    if not rows or not all(_plain(cell) for cell in headers) or not all(_plain(c) for row in rows for c in row) \
            or any(len(row) != len(headers) for row in rows):
        from tabulate import tabulate

        return tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)
    widths = [len(h) + MIN_PADDING for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            if len(cell) > widths[i]:
                widths[i] = len(cell)
    line = GAP.join(f"{{:<{w}}}" for w in widths).format
    out = [line(*headers).rstrip(), GAP.join("-" * w for w in widths)]
    out += [line(*row).rstrip() for row in rows]  # tabulate ends each row at its last character
    return "\n".join(out)


def _plain(cell):
    return type(cell) is str and cell.isascii() and cell.isprintable() and cell[:1] != " " and cell[-1:] != " "
