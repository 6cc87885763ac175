"""What libstdc++ (x86-64) asks malloc for: the sizes of strings, shared_ptr blocks and map nodes,
and the capacities strings and vectors grow to. Caffe's objects are made of these; the host model
(protoaudit.memory.host) and the layers' own objects (a data layer's Datums) size them alike."""

SHARED_PTR_BLOCK = 24  # shared_ptr<T>(new T): _Sp_counted_ptr, a vptr, two counts and the pointer
STRING = 32  # std::string (libstdc++): pointer, length, 16-byte inline buffer
MAP_NODE = 72  # a std::map<string, int> node: colour and 3 links (32), pair<const string, int> (40)
POINTER = 8


def copied(n):
    """Heap bytes of a std::string copied from one of n characters (up to 15 fit inline)."""
    return n + 1 if n > 15 else 0


def assigned(n):
    """Heap bytes of an empty std::string assigned n characters: _M_create doubles the old
    capacity (15) when the new one is below twice it."""
    return 0 if n <= 15 else 31 if n < 30 else n + 1


def grown(n):
    """The capacity push_back leaves a vector of n elements: 0, 1, 2, 4, 8, ..."""
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


def bits(n):
    """Bytes of a vector<bool> of n elements: whole 64-bit words, doubling as it grows."""
    return 0 if n <= 0 else max(64, grown(n)) // 8
