"""protobuf's text-format tokens, found once per file.

Reading a file tries the schemas in turn (net or solver, BVLC or a fork), and the outline of its
blocks reads it once more; protobuf's Tokenizer would find every token anew each time, and finding
them is half of what its parser spends. Here its own token pattern finds them once, and its own
parser reads them back through a Tokenizer that replays them, so parse results and error messages
are protobuf's, token for token, line for line. A net repeats its layers, and the parser reads
each kind of layer block once: the blocks alike are copies with their own names (_AlikeBlocks).

That replay stands on protobuf's internals (the Tokenizer's token pattern and private state, the
parser class behind text_format.Parse). Before its first use it is held to text_format.Parse on a
probe of every kind of token and fault (`replay_works`); where an internal is missing or the two
disagree, every file is read with text_format.Parse itself, and the outline's tokens are found
with the token pattern protobuf's releases publish (_KNOWN_TOKEN). bench/README.md has what the
replay saves.
"""
import bisect
import functools
import re
import sys

from google.protobuf import text_format

# The token pattern of the protobuf releases protoaudit was measured with (text_format.Tokenizer):
# an identifier, a number, a string in either quotes. protobuf joins the two quotes' alternatives
# in the order of a frozenset, which string hashing changes from one process to the next; they
# start with different characters, so either order matches the same.
_WORD_AND_NUMBER = r"""[a-zA-Z_][0-9a-zA-Z_+-]*|([0-9+-]|(\.[0-9]))[0-9a-zA-Z_.+-]*"""
_QUOTED = [r"""{q}[^{q}\n\\]*((\\.)+[^{q}\n\\]*)*({q}|\\?$)""".format(q=q) for q in "\"'"]
_KNOWN_TOKENS = {"|".join([_WORD_AND_NUMBER] + _QUOTED), "|".join([_WORD_AND_NUMBER] + _QUOTED[::-1])}
_KNOWN_TOKEN = "|".join([_WORD_AND_NUMBER] + _QUOTED)
_PROTOBUF_TOKEN = getattr(getattr(text_format.Tokenizer, "_TOKEN", None), "pattern", None)
_TOKEN = _PROTOBUF_TOKEN or _KNOWN_TOKEN
# The Tokenizer's steps in one match: the whitespace and `#` comments it skips (taken whole, as it
# does), then its token pattern or else one character. The token is None at the end of a line.
_NEXT_TOKEN = re.compile(r"(?=((?:\s|#.*$)*))\1(?P<token>" + _TOKEN + r"|.)?")
# With a known pattern, whose groups only group, the same without capturing: findall then
# returns the tokens alone (twice as fast); with any other pattern, or a Python without possessive
# quantifiers, _NEXT_TOKEN serves.
_ALL_TOKENS = (re.compile(r"\s*+(?:#.*+\s*+)*+(" + _TOKEN.replace("(", "(?:") + r"|.)?")
               if _TOKEN in _KNOWN_TOKENS and sys.version_info >= (3, 11) else None)
# Where str.splitlines (the outline's lines) breaks a line but protobuf's parser (split at "\n") does
# not; a "\r" before a "\n" (a Windows file's line ends) breaks the same line for both.
_OTHER_LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # looked for one by one: a regex would take 25 times as long


def _line_tokens(line):
    if _ALL_TOKENS is not None:
        return [t for t in _ALL_TOKENS.findall(line) if t]
    return [m.group("token") for m in _NEXT_TOKEN.finditer(line) if m.group("token") is not None]


def scan(lines):
    """Every token of `lines` as protobuf's Tokenizer finds them, and the index of its line. A line
    the file repeats (a net repeats its layers' settings) is tokenized once."""
    tokens, line_of, seen = [], [], {}
    for number, line in enumerate(lines):
        found = seen.get(line)
        if found is None:
            found = seen[line] = _line_tokens(line)
        if found:
            tokens += found
            line_of += [number] * len(found)
    return tokens, line_of


def has_tokens(text):
    """Whether the text holds anything but whitespace and comments."""
    return any(_line_tokens(line) for line in text.splitlines())


class Text:
    """A file's text and its tokens: by "\\n"-split lines for the parser (as text_format.Parse splits
    them), by str.splitlines for the outline; one scan serves both unless the text has other breaks."""

    def __init__(self, text):
        self.text = text
        self.lines = text.split("\n")
        self.tokens, self.line_of = scan(self.lines)
        other = text.count("\r") != text.count("\r\n") or any(c in text for c in _OTHER_LINE_BREAKS)
        self.outline_tokens = scan(text.splitlines()) if other else (
            self.tokens, self.line_of)
        self.strings = {}  # string token -> its bytes, as the Tokenizer unescapes them
        self._marks = None
        self.layer_starts = None  # (field, token index) of a net's layer blocks, once the parser read it whole
        self.starts = {}  # line index -> the columns of its tokens, found when a column is asked for

    def marks(self):
        """The indices of the bracket tokens, and of the tokens `name`, `bottom` and `top` (for
        _AlikeBlocks), found once."""
        if self._marks is None:
            tokens = self.tokens
            self._marks = ([i for i, t in enumerate(tokens) if t in _BRACKETS],
                           [i for i, t in enumerate(tokens) if t in _NAMING_FIELDS])
        return self._marks

    @functools.cached_property
    def words(self):
        """Every distinct token."""
        return frozenset(self.tokens)

    @functools.cached_property
    def balanced(self):
        """Whether every bracket has its partner: else no schema reads the text, skipping or not."""
        t = self.tokens
        return t.count("{") == t.count("}") and t.count("<") == t.count(">") and t.count("[") == t.count("]")

    @functools.cached_property
    def numbered(self):
        """(field, number) for each `field: number` the text holds: an enum value may be given so."""
        t = self.tokens
        return frozenset((t[i - 2], t[i]) for i in range(2, len(t)) if t[i - 1] == ":" and t[i][:1].isdigit())

    def line(self, i):
        """The line index of token i; past the last token, the last line, where the Tokenizer rests."""
        return self.line_of[i] if i < len(self.tokens) else len(self.lines) - 1

    def column(self, i):
        """The column of token i (found again only when an error message asks for it); past the
        last token, the end of the last line."""
        if i >= len(self.tokens):
            return len(self.lines[-1])
        line = self.line_of[i]
        k = i - bisect.bisect_left(self.line_of, line)
        starts = self.starts.get(line)
        if starts is None:  # once per line: a parse error asks several times, on a line of a million tokens
            starts = self.starts[line] = [m.start("token") for m in _NEXT_TOKEN.finditer(self.lines[line])
                                          if m.group("token") is not None]
        return starts[k]


def parse(text, message):
    """text_format.Parse(text.text, message): through the replay of the tokens `text` (a Text)
    holds where it is protobuf's parser to the letter (replay_works), else text_format.Parse."""
    if replay_works():
        return _Parser().parse(_Replay(text), message)
    return text_format.Parse(text.text, message)


def parse_skipping(text, message, refused=frozenset()):
    """`message` read from `text` (a Text) by protobuf's parser told to skip unknown fields:
    [(field, message type, line)] for each one skipped (not those inside a field skipped). Through
    the replay where it works: a file no schema reads is read past unknown fields once per schema
    that might read it, and protobuf's own Tokenizer would take most of each pass. Raises
    text_format.ParseError where the text does not read even so, or at once where a field named in
    `refused` would be skipped at the top (a net's `layer` in a file read as a solver: such a
    reading is of the wrong kind of file, and skipping the rest would read all of it for nothing)."""
    if _SkippingParser is None:
        raise text_format.ParseError("this protobuf cannot skip unknown fields")
    parser = _SkippingParser(refused, message.DESCRIPTOR.full_name)
    if replay_works():
        parser.parse(_Replay(text), message)
    else:
        parser.ParseLines(text.lines, message)
    return parser.skipped


if hasattr(text_format, "_Parser") and _PROTOBUF_TOKEN is not None:
    class _Replay(text_format.Tokenizer):
        """The Tokenizer's state at each token (the token, its line and column, the previous token's,
        the current line's text), read from a Text instead of worked out from the text again."""

        def __init__(self, text):  # the base __init__ would read the text: not called
            self.contains_silent_marker_before_current_token = False
            self._skip_comments = True
            self._text = text
            self._count = len(text.tokens)
            self._at = self._before = 0  # it starts on its first token, also the "previous" one
            self.token = text.tokens[0] if self._count else ""

        def NextToken(self):
            self._before = self._at
            if self._at < self._count:
                self._at += 1
            self.token = self._text.tokens[self._at] if self._at < self._count else ""

        def _ConsumeSingleByteString(self):
            # protobuf's own unescaping, once per distinct string: nets repeat type and blob names
            token = self.token
            value = self._text.strings.get(token)
            if value is None:
                value = self._text.strings[token] = super()._ConsumeSingleByteString()
            else:
                self.NextToken()
            return value

        def skip_to(self, at):
            """On token `at`, as if every token before it had been read."""
            self._before, self._at = at - 1, at
            self.token = self._text.tokens[self._at] if self._at < self._count else ""

        _line = property(lambda self: self._text.line(self._at))
        _column = property(lambda self: self._text.column(self._at))
        _previous_line = property(lambda self: self._text.line(self._before))
        _previous_column = property(lambda self: self._text.column(self._before))
        _current_line = property(lambda self: self._text.lines[self._line] if self._at < self._count else "")

    class _Parser(text_format._Parser):
        """text_format's parser (as text_format.Parse makes it) over a replaying Tokenizer."""

        def parse(self, tokenizer, message):
            # what _Parser.ParseLines and _ParseOrMerge do around their Tokenizer, with each
            # layer block read once per likeness (_AlikeBlocks)
            self._allow_multiple_scalars = False
            self.root_type = message.DESCRIPTOR.full_name
            blocks = _AlikeBlocks(tokenizer._text, message)
            starts = []
            while not tokenizer.AtEnd():
                if tokenizer.token in blocks.fields:
                    starts.append((tokenizer.token, tokenizer._at))
                if not blocks.copied(tokenizer, message):
                    skips = self._skips()
                    self._MergeField(tokenizer, message)
                    # a block with a field read past is not copied: each of its likes notes its own
                    blocks.learn(tokenizer, message, alike=self._skips() == skips)
            if blocks.fields:
                tokenizer._text.layer_starts = starts
            return message

        def _skips(self):
            return 0
else:
    _Replay = _Parser = None


if hasattr(text_format, "_Parser") and hasattr(text_format._Parser, "_SkipFieldContents"):
    class _SkippingParser(_Parser or text_format._Parser):
        """protobuf's parser told to skip unknown fields, noting each one it skips."""

        def __init__(self, refused, root):
            super().__init__(allow_unknown_field=True)
            self.skipped, self._inside = [], 0
            self._refused, self._root = refused, root

        def _skips(self):
            return len(self.skipped)

        def _SkipFieldContents(self, tokenizer, field_name, immediate_message_type):
            if not self._inside:
                if field_name in self._refused and immediate_message_type == self._root:
                    raise tokenizer.ParseError(f'"{field_name}" belongs to another kind of file')
                self.skipped.append((field_name, immediate_message_type.split(".")[-1],
                                     tokenizer._previous_line + 1))
            self._inside += 1
            try:
                super()._SkipFieldContents(tokenizer, field_name, immediate_message_type)
            finally:
                self._inside -= 1
else:  # a protobuf without the hook: every file is read strictly
    _SkippingParser = None


_LAYER_FIELDS = ("layer", "layers")  # a net's repeated layer blocks (V2, V1)
_NAMING_FIELDS = frozenset({"name", "bottom", "top"})
_QUOTES = frozenset("\"'")
_OPENING = frozenset("{<")
_BRACKETS = frozenset("{<}>")


class _AlikeBlocks:
    """A net's layer blocks, each kind read by protobuf's parser once. Two blocks whose tokens are
    the same but for the plain quoted values of their own `name`, `bottom` and `top` (no escapes,
    not joined to a next string) are read alike: the second is the first's message with those
    values put in, and the Tokenizer moved past it, separator and all, as the parser would. A
    block the parser refused is never learnt; a repeated net (a ResNet's blocks, a generated
    net's thousands of layers) is read at the cost of its distinct layers."""

    def __init__(self, text, message):
        fields = message.DESCRIPTOR.fields_by_name
        self.fields = {n for n in _LAYER_FIELDS if n in fields and fields[n].message_type is not None
                       and fields[n].is_repeated}
        self.tokens = text.tokens
        self.brackets, self.naming = text.marks() if self.fields else ((), ())
        # block key -> (field, its message less its naming values); None where not all are placeholders
        self.known = {}
        self.pending = None  # the key of the block the parser is about to read

    def _block(self, at):
        """(key, naming values in order, the index past the block) of the block at token `at`, or
        None: its tokens, each plain naming value (`name: "..."` directly inside it) as None."""
        tokens, brackets = self.tokens, self.brackets
        k = bisect.bisect_left(brackets, at + 1)
        if k == len(brackets) or brackets[k] != at + 1 or tokens[at + 1] != "{":
            return None
        depth, inner = 0, []  # inner: the (open, close) of the blocks directly inside it
        while True:
            if k == len(brackets):
                return None  # unclosed: the parser says where
            i = brackets[k]
            if tokens[i] in _OPENING:
                depth += 1
                if depth == 2:
                    opened = i
            else:
                depth -= 1
                if depth == 1:
                    inner.append((opened, i))
                elif depth == 0:
                    break
            k += 1
        end = i + 1
        key, values = tokens[at:end], []
        naming = self.naming
        for p in naming[bisect.bisect_left(naming, at):bisect.bisect_left(naming, end)]:
            if tokens[p + 1] != ":":  # (then the block's closing brace comes after the value)
                continue
            token = tokens[p + 2]
            if (token[0] in _QUOTES and len(token) > 1 and token[-1] == token[0] and "\\" not in token
                    and tokens[p + 3][0] not in _QUOTES and not any(o < p < c for o, c in inner)):
                values.append((tokens[p], token[1:-1]))
                key[p + 2 - at] = None
        return tuple(key), values, end

    def copied(self, tokenizer, message):
        """Whether the block at the Tokenizer was read as one alike before: then it is added."""
        self.pending = None
        if tokenizer.token not in self.fields:
            return False
        block = self._block(tokenizer._at)
        if block is None:
            return False
        key, values, end = block
        template = self.known.get(key, False)
        if template is False:
            self.pending = key, values
            return False
        if template is None:
            return False
        field, bare = template
        layer = getattr(message, field).add()
        layer.CopyFrom(bare)
        for name, value in values:  # in the order of the text, as the parser sets them
            if name == "name":
                layer.name = value
            else:
                getattr(layer, name).append(value)
        tokenizer.skip_to(end)
        if not tokenizer.TryConsume(","):
            tokenizer.TryConsume(";")
        return True

    def learn(self, tokenizer, message, alike=True):
        """The block the parser just read, kept for those alike (when its naming values were all
        placeholders, and `alike`: nothing else makes it its own)."""
        if self.pending is None:
            return
        key, values = self.pending
        if not alike:
            self.known[key] = self.pending = None
            return
        field = key[0]
        made = getattr(message, field)[-1]
        # a bottom or top given in a list ([...]) is no placeholder: such a block is not copied
        whole = all(sum(f == name for f, _ in values) == len(getattr(made, name)) for name in ("bottom", "top"))
        bare = None
        if whole:  # the block less its placeholders' values, which each copy sets
            bare = type(made)()
            bare.CopyFrom(made)
            for name in {f for f, _ in values}:
                bare.ClearField(name)
        self.known[key] = (field, bare) if whole else None
        self.pending = None


# What the replay is held to before its first use: every kind of token (identifiers, numbers of each
# form, strings with escapes and in both quotes, enums, nested and repeated messages with both
# brackets, comments, separators), then faults at several places, each against text_format.Parse.
PROBE = '''name: "probe" # a comment
layer { name: 'a\\tb\\x41\\101' type: "Convolution" bottom: "data" top: "a"
  param { lr_mult: 1 decay_mult: 0.5 } param < lr_mult: 2.0e0 >
  convolution_param { num_output: 0x10 kernel_size: 3 kernel_size: 3, pad: -0 engine: CAFFE
    weight_filler { type: "msra" std: .01 } bias_term: false } }
layer { name: "r1" type: "ReLU" bottom: "a" top: "r1" } ;
layer { name: 'r2' type: "ReLU" bottom: "r1" top: "r2" },
layer { name: "r3" type: "ReLU" bottom: ["r2"] top: "r3" }
layer { name: "r4" type: "ReLU" bottom: "r3" top: "r4" bottom: "a" }
input: "x" input_dim: 1 input_dim: 3
state { phase: TEST stage: "s" level: 2 }
'''
PROBE_FAULTS = ('layer { name: "a" type: "ReLU" bogus: 1 }', 'layer { name: "a" \n  top: }',
                'layer { name: "a" top: "a" }\nlayer { name: "b" top: "b" }\nlayer { name: "c" top: "c" bogus: 1 }',
                'layer { name: "a"', 'input_dim: 1.5', 'state { phase: NOPE }', 'name: "unterminated',
                'layer { convolution_param { num_output: 99999999999 } }', '\n\n  }  ', '# only a comment\n')


@functools.cache
def replay_works():
    """Whether the replay reads the probe as text_format.Parse does: the same message, and the same
    message, line and column for each fault (False too where an internal it needs is missing)."""
    if _Parser is None:
        return False
    from .schema import load_schema

    net = load_schema("bvlc").NetParameter
    try:
        for probe in (PROBE,) + PROBE_FAULTS:
            mine = theirs = None
            try:
                mine = _Parser().parse(_Replay(Text(probe)), net()).SerializeToString()
            except text_format.ParseError as e:
                mine = (str(e), e.GetLine(), e.GetColumn())
            try:
                theirs = text_format.Parse(probe, net()).SerializeToString()
            except text_format.ParseError as e:
                theirs = (str(e), e.GetLine(), e.GetColumn())
            if mine != theirs:
                return False
    except Exception:  # an internal that changed shape: protobuf's own parser, then
        return False
    return True
